#!/usr/bin/env bash
# Session 50, one call: with the transposed small tile at D = 64 and 256 landed, why D = 64 (gpt-oss's
# shape) reads at only half the copy bandwidth: the split count swept on the two configs (ours only),
# then ncu --set full of the tile kernel on each (D = 64 with its top SASS lines).
#   run tool: command "bash bench/experiments/run_2026-11-28_d64_d256_profile.sh"
set -uo pipefail
source bench/experiments/run_lib.sh
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH=${PYTHONPATH:-}
patch -p1 --quiet < "$E/2026-11-29_paged_kv_splits_env.patch" || { echo "PATCH FAILED"; exit 1; }
build_into /tmp/jp
CFGS="decode_fp8_d64_h64_b64_ctx4k decode_fp8_d256_softcap_b32_ctx8k"
for n in default 1 2 3 4; do
  echo "== splits $n" | tee -a "$OUT/split_sweep.log"
  env $([[ $n != default ]] && echo JAXPAGED_KV_SPLITS=$n) timeout 60 python3 "$R/bench/bench.py" --ours-only --ours-step \
    --only $CFGS 2>&1 | grep -E "^decode|Error" | cut -c1-110 | tee -a "$OUT/split_sweep.log"
done
ncu_paged d64_tr decode_fp8_d64_h64_b64_ctx4k source
ncu_paged d256_tr decode_fp8_d256_softcap_b32_ctx8k
grep -E "^=== |Duration|DRAM Throughput|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |Registers Per|Achieved Occupancy|Grid Size|Block Size|Waves Per SM" \
  "$OUT/profile_details.txt" | head -40
echo "total $(( $(date +%s) - start )) s"
