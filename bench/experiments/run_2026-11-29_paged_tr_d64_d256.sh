#!/usr/bin/env bash
# Prepared in session 49 (NOTES item 74 e), one call (carry .whl): the transposed small tile at
# head dims 64 and 256 (2026-11-29_paged_tr_d64_d256.patch: fp8 caches' tiles of <= 8 rows there
# run TR on raw register-path stages instead of converting each stage into a 16-bit buffer; SASS a
# warp a stage: D = 64 588 -> 366, D = 256 766 + the conversion pass -> 527; registers 116 -> 122
# and 162 -> 168, blocks an SM unchanged) against HEAD: both built (bench/ab.sh) with the new
# tree's sanitizer driver beside them; ROUNDS (default 3) alternating rounds of the D = 64 and
# D = 256 fp8 configs and the D = 128 one (unchanged: the control), per call and per layer; then
# the new tree's paged tests beside memcheck and racecheck of its paged driver cases. Land it if
# its tests and memcheck pass and the two gain.
#   run tool: command "bash bench/experiments/run_2026-11-29_paged_tr_d64_d256.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
patch_ab 2026-11-29_paged_tr_d64_d256.patch "${ROUNDS:-3}" 240 decode_fp8_d64_h64_b64_ctx4k decode_fp8_d256_softcap_b32_ctx8k decode_fp8_b64_ctx4k
paged_sanitize_beside_tests new "not mla" 8 test_fp8.py test_paged_attention.py test_decode_loop.py test_plan.py
echo "total $(( $(date +%s) - start )) s"
