#!/usr/bin/env bash
# Prepared in session 52 (NOTES item 77 f), one call (carry .whl; ~450 s): the occupancy split
# (2026-11-30_paged_occupancy_splits.patch): a pure-decode grid of the DTR D = 256 instance that
# fits one wave with more than half of it used (so choose_kv_splits keeps it unsplit) but whose
# blocks an SM stream under 70% of the SM's share of the device's peak bandwidth (memory clock x
# bus width / SMs; a block streams ~12.8 GB/s alone, item 77 c) runs in two nearly full waves
# (the smallest split count filling >= 90% of two waves). Predicted: on the H200 fp8 D = 256 3
# splits, 0.328 -> ~0.28 ms (session 51's forced 3 splits: 0.279); on the H100 no change (its
# share, 25.4 GB/s an SM, is ~98% streamed unsplit). Controls fp8 h64 / b64 and bf16 D = 256:
# identical launches, level. 2 alternating rounds against HEAD; then the new tree's fp8 and paged
# tests (test_fp8's new occupancy test: 256 blocks at D = 256) beside memcheck and racecheck of its
# paged driver cases. Land it only with item 77 c's H100 prediction checked
# (run_2026-11-30_split_sweep_d256.sh on an H100), or with a note of why the H200 alone suffices.
#   run tool: command "bash bench/experiments/run_2026-11-30_occupancy_splits.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv | tee "$OUT/gpu.txt"
patch_ab 2026-11-30_paged_occupancy_splits.patch "${ROUNDS:-2}" 150 \
  decode_fp8_d256_softcap_b32_ctx8k decode_fp8_h64_b32_ctx8k decode_fp8_b64_ctx4k decode_d256_softcap_b32_ctx8k
paged_sanitize_beside_tests new "not mla" 8 test_fp8.py test_paged_attention.py test_plan.py
echo "total $(( $(date +%s) - start )) s"
