#!/usr/bin/env bash
# Prepared in session 51 (NOTES item 76), one call (carry .whl; ~320 s): (1) on a GPU for the first
# time, test_fp8's split_inside_one_wave test of ab831ff's one-wave split rule, with the other fp8
# decode tests; (2) fp8 D = 256 (decode_fp8_d256_softcap_b32_ctx8k: 256 blocks of the DTR
# instance's 396 resident, 76% of copy bandwidth unsplit, 3 splits measured -15%): ncu --set full
# of the tile kernel unsplit (the launcher's count) and at JAXPAGED_KV_SPLITS=3, to tell why 2
# blocks an SM do not stream the bandwidth (DRAM throughput, eligible warps, stall reasons, bytes
# in flight) before any rule takes those splits (item 39 d lost 7% on the same geometry). One build
# of HEAD with the split-count switch (2026-11-29_paged_kv_splits_env.patch: no effect unset).
#   run tool: command "bash bench/experiments/run_2026-11-29_owed_test_and_d256_profile.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_patched /tmp/jp 2026-11-29_paged_kv_splits_env.patch
tests_of_build 150 "split_inside or several_waves or keys_outside or cache_matches" test_fp8.py
for run in d256_s1:1 d256_s3:3; do
  IFS=: read -r name n <<< "$run"
  export JAXPAGED_KV_SPLITS=$n
  ncu_paged "$name" decode_fp8_d256_softcap_b32_ctx8k source
  unset JAXPAGED_KV_SPLITS
done
grep -E "^=== |Duration|DRAM Throughput|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |Registers Per|Theoretical Occupancy|Achieved Occupancy|Grid Size|L2 Hit" \
  "$OUT/profile_details.txt" | head -40
echo "total $(( $(date +%s) - start )) s"
