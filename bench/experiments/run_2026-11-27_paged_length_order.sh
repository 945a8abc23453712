#!/usr/bin/env bash
# Session 37 (NOTES item 58): pure paged decode with no tile list at any wave count - each block
# finds its sequence in the list's longest-first order itself (2026-11-27_paged_length_order.patch,
# up to 1024 sequences) - against HEAD: the changed kernel's tests on the patched build, then one
# round of both, per call and per layer (uniform lengths: the list kernel's ~10 us a call; varied:
# decode_varlen_b128, where direct sequence order lost 10%).
#   run tool: command "bash bench/experiments/run_2026-11-27_paged_length_order.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
AB_TEST='lo:tests/test_paged_attention.py tests/test_fp8.py tests/test_plan.py tests/test_sinks.py -n 8 -k "not mla"' \
AB_TEST_LIMIT=170 timeout 420 bash bench/ab.sh ${ROUNDS:-1} base=. lo=patch:$E/2026-11-27_paged_length_order.patch \
  -- --only decode_fp8_b64_ctx4k decode_varlen_b128 decode_b64_ctx4k decode_b256_ctx1k decode_b16_ctx2k \
  --ours-step > "$OUT/ab_stdout.log" 2>&1
grep -E "builds|FAILED|tests of|total" "$OUT/ab_stdout.log"
grep -E "^(== |decode)" "$OUT/ab.log" | cut -c1-100
echo "total $(( $(date +%s) - start )) s"
