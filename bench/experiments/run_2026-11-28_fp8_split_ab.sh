#!/usr/bin/env bash
# Session 48 (NOTES item 73 d): the paged tile kernel's fp8 conversions through
# fp8x4_to_half2x2_bits (9efed8d) against the tree before it (e3d1f0b, exported to abtmp/base), in
# one call (carry .whl and abtmp): both built by bench/ab.sh; the new tree's paged fp8 tests, decode
# loops and the fp8 MLA tests first; then ROUNDS (default 3) alternating rounds on the three fp8
# decode configs (and bf16 b64, untouched: the control), per call and per layer.
#   mkdir -p abtmp/base && git archive e3d1f0b | tar -x -C abtmp/base
#   run tool: command "bash bench/experiments/run_2026-11-28_fp8_split_ab.sh", carry [".whl", "abtmp"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
AB_TEST="new:tests/test_fp8.py tests/test_decode_loop.py tests/test_paged_attention.py -n 8 -x -k 'paged or loop or fp8 or decode'" \
  AB_TEST_LIMIT=220 OUT=$OUT/ab timeout 560 bash bench/ab.sh "${ROUNDS:-3}" base=abtmp/base new=. -- --ours-step \
  --only decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k decode_fp8_h64_b32_ctx8k decode_b64_ctx4k > "$OUT/ab_run.log" 2>&1
grep -E "builds|FAILED|tests of" "$OUT/ab_run.log"
grep -E "^==|^decode" "$OUT/ab/ab.log" | cut -c1-100
echo "total $(( $(date +%s) - start )) s"
