#!/usr/bin/env bash
# Prepared in session 59 (NOTES item 84 h), one call (carry .whl; ~330 s): the wide kernel's
# epilogue with less code (2026-12-08_wide_epilogue_compact.patch). The probe's epilogue took
# 10-20k cycles (sums met -> last store) of a 165-300k-cycle block, while its instructions per
# thread are ~1,100: one hypothesis is instruction fetch - the epilogue runs once a sequence,
# through 34-38 KB of unrolled code (cuobjdump of fp8_wide.cu, c666c7d) that interleaves whole and
# cut sequences' stores. The patch computes each row's factor and lse once (threads 0-63, into
# sMax's place) and runs whole and cut sequences in separate loops: a whole sequence's epilogue
# spans 815-928 instructions (13-15 KB) instead of 2,130-2,380; results bit-identical by
# construction (the same sums, factor and products). Predicted: if fetch is what the epilogue
# waits on, -2 to -4% per call dense, -4 to -8% on lists of 2048; level otherwise. Builds base and
# compact, the wide kernel's cases on compact, two alternating rounds.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
AB_TEST="compact:tests/test_fp8.py tests/test_mla_sparse.py -n 12 -k mla" AB_TEST_LIMIT=100 \
  OUT=$OUT timeout 500 bash bench/ab.sh 2 base=. compact=patch:$E/2026-12-08_wide_epilogue_compact.patch -- --ours-step \
  --only sparse_fp8math_h128_b64_topk2048 mla_fp8math_h128_b64_ctx4k mla_656fp8math_h128_b64_ctx4k > "$OUT/ab_run.log" 2>&1
grep -E "^==|builds|tests of|FAILED|^(mla|sparse)_|total" "$OUT/ab_run.log" | cut -c1-130 | tail -20
echo "total $(( $(date +%s) - start )) s"
