#!/usr/bin/env bash
# Session 50, one call (carry .whl): the tree with both session-49 patches landed together
# (2026-11-29_tile_softmax_lambdas.patch, tested alone in run_2026-11-29_fp8_splits_and_profile.sh;
# 2026-11-29_paged_tr_d64_d256.patch, tested alone in run_2026-11-29_paged_tr_d64_d256.sh):
# build, the paged GPU tests, then the fp8 paged configs with their peers (bench.py, checked
# against the reference) for the H200 record.
#   run tool: command "bash bench/experiments/run_2026-11-28_tr_combined_check.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_into /tmp/jp
tests_of_build 240 "not mla" test_fp8.py test_paged_attention.py test_decode_loop.py test_plan.py
timeout 240 python3 "$R/bench/bench.py" --out "$OUT/fp8" --only decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k \
  decode_fp8_h64_b32_ctx8k decode_fp8_d64_h64_b64_ctx4k decode_fp8_d256_softcap_b32_ctx8k > "$OUT/bench.log" 2>&1
echo "bench rc $?"
grep -E "^decode|Error|error" "$OUT/bench.log" | cut -c1-130
echo "total $(( $(date +%s) - start )) s"
