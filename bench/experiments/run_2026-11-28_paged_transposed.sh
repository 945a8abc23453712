#!/usr/bin/env bash
# Session 49 (NOTES item 74 b): the fp8 register path's transposed small tile (attend_tile's TR),
# one call (carry .whl): the package and the sanitizer driver built from the working tree; then
# ROUNDS (default 3) alternating rounds of the fp8 decode configs with JAXPAGED_PAGED_TRANSPOSED=0
# (the plain tile: "off") and without it ("on"), per call and per layer, on the same build; then
# the paged tests beside memcheck and racecheck (--quick) of the driver's paged cases.
#   run tool: command "bash bench/experiments/run_2026-11-28_paged_transposed.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
build_with_sanitizer new new=patch:  # (patch: with none = a copy of the tree)
for r in $(seq "${ROUNDS:-3}"); do
  for v in off on; do
    echo "== $v round $r" | tee -a "$OUT/tr_ab.log"
    (cd /tmp && env $([[ $v == off ]] && echo JAXPAGED_PAGED_TRANSPOSED=0) PYTHONPATH=/tmp/ab_new timeout 60 \
      python3 /tmp/ab_src_new/bench/bench.py --ours-only --ours-step --only decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k \
      decode_fp8_h64_b32_ctx8k 2>&1) | grep -E "^decode|copy bandwidth|Error|error" | cut -c1-110 | tee -a "$OUT/tr_ab.log"
  done
done
echo "timing done $(( $(date +%s) - start )) s"
paged_sanitize_beside_tests new "not mla" 8 test_fp8.py test_paged_attention.py test_plan.py test_decode_loop.py \
  test_adversarial.py
echo "total $(( $(date +%s) - start )) s"
