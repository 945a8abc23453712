#!/usr/bin/env bash
# Prepared in session 49 (NOTES item 74 c), one call (carry .whl): after the transposed tile
# (bc3edd9) fp8 decode is no longer purely issue-bound (time fell by a quarter of the instructions'
# fall), so
#  1. build (sm_90a) with 2026-11-29_paged_kv_splits_env.patch (JAXPAGED_KV_SPLITS=n forces n
#     splits; unset = the launcher's choice) and 2026-11-29_tile_softmax_lambdas.patch (a tidy to
#     land if its tests pass) into /tmp/jp; test_fp8 and test_paged_attention (not mla);
#  2. the split count swept (default 1 2 3 4 6) on the fp8 decode configs and two short bf16 ones,
#     ours only, per call and per layer (session 31's sweep, item 52 e, was on a kernel 30% slower);
#  3. ncu --set full of the tile kernel: fp8 b64 with the transposed tile and without
#     (JAXPAGED_PAGED_TRANSPOSED=0), fp8 h64 (256 unsplit blocks, 2 an SM) with it; the details
#     in $OUT/profile_details.txt, b64's top SASS lines in $OUT/profile_source_b64_tr.txt.
#   run tool: command "bash bench/experiments/run_2026-11-29_fp8_splits_and_profile.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_patched /tmp/jp 2026-11-29_paged_kv_splits_env.patch 2026-11-29_tile_softmax_lambdas.patch
# (the lambdas patch: the softmax's score and running-maximum steps shared by the plain and the
# transposed tile; same SASS instruction counts, only compare forms differ - its GPU tests here)
tests_of_build 150 "not mla" test_fp8.py test_paged_attention.py
CFGS=${CFGS:-"decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k decode_fp8_h64_b32_ctx8k decode_b16_ctx2k decode_b256_ctx1k"}
# shellcheck disable=SC2086
split_sweep 80 "${SPLITS:-default 1 2 3 4 6}" $CFGS
echo "sweep done $(( $(date +%s) - start )) s"
for run in b64_tr:decode_fp8_b64_ctx4k:1 b64_plain:decode_fp8_b64_ctx4k:0 h64_tr:decode_fp8_h64_b32_ctx8k:1; do
  IFS=: read -r name cfg tr <<< "$run"
  (( 585 - ($(date +%s) - start) < 90 )) && { echo "no time for ncu $name"; break; }
  JAXPAGED_PAGED_TRANSPOSED=$tr ncu_paged "$name" "$cfg" $([[ $name == b64_tr ]] && echo source)
done
grep -E "^=== |Duration|DRAM Throughput|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |Registers Per|Achieved Occupancy" \
  "$OUT/profile_details.txt" | head -40
echo "total $(( $(date +%s) - start )) s"
