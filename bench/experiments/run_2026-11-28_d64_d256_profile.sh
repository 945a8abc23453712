#!/usr/bin/env bash
# Session 50, one call: with the transposed small tile at D = 64 and 256 landed, why D = 64 (gpt-oss's
# shape) reads at only half the copy bandwidth: the split count swept on the two configs (ours only),
# then ncu --set full of the tile kernel on each (D = 64 with its top SASS lines).
#   run tool: command "bash bench/experiments/run_2026-11-28_d64_d256_profile.sh"
set -uo pipefail
source bench/experiments/run_lib.sh
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH=${PYTHONPATH:-}
build_patched /tmp/jp 2026-11-29_paged_kv_splits_env.patch
split_sweep 60 "default 1 2 3 4" decode_fp8_d64_h64_b64_ctx4k decode_fp8_d256_softcap_b32_ctx8k
ncu_paged d64_tr decode_fp8_d64_h64_b64_ctx4k source
ncu_paged d256_tr decode_fp8_d256_softcap_b32_ctx8k
grep -E "^=== |Duration|DRAM Throughput|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |Registers Per|Achieved Occupancy|Grid Size|Block Size|Waves Per SM" \
  "$OUT/profile_details.txt" | head -40
echo "total $(( $(date +%s) - start )) s"
