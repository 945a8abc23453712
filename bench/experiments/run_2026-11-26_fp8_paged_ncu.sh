#!/usr/bin/env bash
# Session 31 (NOTES item 52 c): where fp8 decode_b64_ctx4k's time goes against b8_ctx32k and
# h64_b32_ctx8k (same bytes, same tensor-core work per key): every kernel of two calls of each
# config (the tile list, the tile kernel, the split merge) with ncu's speed-of-light, launch,
# occupancy and warp-state sections, then the full set on b64's and b8's tile kernel.
#   run tool: command "bash bench/experiments/run_2026-11-26_fp8_paged_ncu.sh", carry [".whl"]
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
REPO=$(pwd)
export JAXPAGED_CUDA_ARCHS=90a
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
python3 -m pip install --no-build-isolation --no-deps . > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
cd /tmp
export PYTHONPATH=/tmp/site
for cfg in decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k decode_fp8_h64_b32_ctx8k; do
  timeout 120 ncu --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    -k "regex:paged|combine" -c 6 python3 "$REPO/bench/profile_one.py" "$cfg" --calls 2 > "/tmp/sol_$cfg.log" 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Grid Size|Waves Per SM|Achieved Occupancy|Issue Slot|Warp Cycles Per Issued" \
    "/tmp/sol_$cfg.log" | sed "s/^/$cfg: /" > "$OUT/sol_$cfg.txt"
done
cat "$OUT"/sol_*.txt | grep -E "\(|Duration|DRAM" | cut -c1-150
for cfg in decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k; do
  timeout 150 ncu --set full -k regex:paged_tile_kernel -c 1 -f -o "/tmp/full_$cfg" python3 "$REPO/bench/profile_one.py" "$cfg" \
    > "/tmp/full_$cfg.log" 2>&1 || tail -3 "/tmp/full_$cfg.log"
  ncu -i "/tmp/full_$cfg.ncu-rep" --page details > "$OUT/full_$cfg.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Issue Slots Busy|Eligible Warps|Stall|L2 Hit|L1/TEX Hit|Achieved Occupancy" "$OUT/full_$cfg.txt" | head -16
done
