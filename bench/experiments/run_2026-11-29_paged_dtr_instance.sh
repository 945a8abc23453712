#!/usr/bin/env bash
# Prepared in session 50 (NOTES item 75 e), one call (carry .whl; ~520 s): the decode-transposed
# instance (2026-11-29_paged_dtr_instance.patch): pure decode with GQA <= 8 over fp8 caches runs its
# own tile-kernel instance (DTR) holding only the transposed tile, with no converted buffer, D = 128
# one stage fewer (3), and __launch_bounds__ asking for 5 / 4 / 3 blocks an SM at D = 64 / 128 /
# 256 (sm_90a, bf16 queries: 93 / 127 / 168 registers, no spills; the TR loops 360 / 477 / 529
# SASS a warp a stage, as before). Against HEAD, where those are 4 / 3 / 3 blocks (D = 128: 163
# registers and 69 KiB), after session 50 measured D = 64 going 3 -> 4 blocks at -30%. 2
# alternating rounds of four fp8 configs; then the new tree's paged tests beside memcheck and
# racecheck of its paged driver cases (in the call's time left). Land it if they pass and D = 128
# gains (decode_fp8_b64_ctx4k, h64) with D = 64 / 256 not losing.
#   run tool: command "bash bench/experiments/run_2026-11-29_paged_dtr_instance.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
patch_ab 2026-11-29_paged_dtr_instance.patch "${ROUNDS:-2}" 150 \
  decode_fp8_b64_ctx4k decode_fp8_h64_b32_ctx8k decode_fp8_d64_h64_b64_ctx4k decode_fp8_d256_softcap_b32_ctx8k
paged_sanitize_beside_tests new "not mla" 8 test_fp8.py test_paged_attention.py test_decode_loop.py test_plan.py
echo "total $(( $(date +%s) - start )) s"
