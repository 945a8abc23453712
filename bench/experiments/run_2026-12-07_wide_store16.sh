#!/usr/bin/env bash
# Session 59 (NOTES item 84 g), one call (carry .whl; ~400 s): the wide kernel's epilogue with 16-byte
# stores (2026-12-07_wide_store16.patch). The traces (item 84 f) show its epilogue taking 10-20k
# cycles from "sums met" to "sequence stored" (kF8 dense 10.4k, kDF dense 17.3k, kDF sparse 19.9k
# of a 165k-cycle block): 64 4-byte stores a thread, each warp instruction four rows x 32 bytes.
# The patch packs each row's four words by a 4 x 4 transpose across lanes g = 4h + i (shuffles
# 8 and 4 apart) into one 16-byte store: 16 stores a thread. Builds base and store16, the wide
# kernel's cases on store16 (test_fp8 + test_mla_sparse, -k mla), then two alternating rounds.
# Predicted: if the stores' count is what the epilogue waits on, -3 to -5% per call on the sparse
# fp8-math config (16 pairs a block), -2 to -3% on the dense ones; level if the time is the
# memory system's answer to every block's writes at once.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
AB_TEST="store16:tests/test_fp8.py tests/test_mla_sparse.py -n 12 -k mla" AB_TEST_LIMIT=100 \
  OUT=$OUT timeout 420 bash bench/ab.sh 2 base=. store16=patch:$E/2026-12-07_wide_store16.patch -- --ours-step --only \
  sparse_fp8math_h128_b64_topk2048 mla_fp8math_h128_b64_ctx4k > "$OUT/ab_run.log" 2>&1
grep -E "^==|builds|tests of|FAILED|^(mla|sparse)_|total" "$OUT/ab_run.log" | cut -c1-130 | tail -16
echo "total $(( $(date +%s) - start )) s"
