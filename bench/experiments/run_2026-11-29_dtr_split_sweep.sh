#!/usr/bin/env bash
# Prepared in session 50 (NOTES item 75 e), one call after run_2026-11-29_paged_dtr_instance.sh
# (carry .whl; ~300 s): with the decode-transposed instance's 4-5 blocks an SM, one-wave grids
# that the split model keeps unsplit (h64: 256 blocks of D = 128; D = 256: 256 blocks) leave half
# the SM slots empty, and 2 splits would now fit one wave (at 3 blocks an SM they made 2 waves:
# h64 0.152 -> 0.183 ms, item 75 a). One build with the DTR patch and the split-count switch
# (2026-11-29_paged_kv_splits_env.patch), the count swept on the fp8 decode configs, ours only,
# per call and per layer; then ncu --set full of the DTR kernel on fp8 b64 and h64 (launcher's
# count). If a forced count beats the launcher's by more than the rounds' spread, refit
# choose_kv_splits' one-wave rule (common/kv_splits.h) and A/B it.
#   run tool: command "bash bench/experiments/run_2026-11-29_dtr_split_sweep.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_patched /tmp/jp 2026-11-29_paged_dtr_instance.patch 2026-11-29_paged_kv_splits_env.patch
CFGS=${CFGS:-"decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k decode_fp8_h64_b32_ctx8k decode_fp8_d64_h64_b64_ctx4k decode_fp8_d256_softcap_b32_ctx8k"}
# shellcheck disable=SC2086
split_sweep 80 "${SPLITS:-default 1 2 3 4}" $CFGS
echo "sweep done $(( $(date +%s) - start )) s"
for run in b64_dtr:decode_fp8_b64_ctx4k h64_dtr:decode_fp8_h64_b32_ctx8k; do
  IFS=: read -r name cfg <<< "$run"
  (( 585 - ($(date +%s) - start) < 90 )) && { echo "no time for ncu $name"; break; }
  ncu_paged "$name" "$cfg" $([[ $name == b64_dtr ]] && echo source)
done
grep -E "^=== |Duration|DRAM Throughput|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |Registers Per|Theoretical Occupancy|Achieved Occupancy|Grid Size" \
  "$OUT/profile_details.txt" | head -30
echo "total $(( $(date +%s) - start )) s"
