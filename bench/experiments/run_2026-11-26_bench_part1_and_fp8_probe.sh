#!/usr/bin/env bash
# Session 31, one device call: the full bench's first half on HEAD (bench.py --part 1/2; the
# second half is the next call on the same warm build), then bench/experiments/fp8_format_probe.py
# and ncu of the paged tile kernel on decode_fp8_b64_ctx4k and decode_fp8_b8_ctx32k (NOTES 52 c).
#   run tool: command "bash bench/experiments/run_2026-11-26_bench_part1_and_fp8_probe.sh", carry [".whl"]
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
REPO=$(pwd)
export JAXPAGED_CUDA_ARCHS=90a
BENCH_ARGS="--part ${PART:-1/2}" bash bench/device_run.sh bench 2>&1 | grep -vE "^(NVIDIA|name,)" | tail -40
[[ -n ${PROBE:-1} ]] || exit 0
cd /tmp
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
timeout 120 python3 "$REPO/bench/experiments/fp8_format_probe.py" 2>&1 | tee "$OUT/fp8_format_probe.log" | grep -E "^fp8"
for cfg in decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k; do
  timeout 120 ncu --set full -k regex:paged_tile -c 1 -f -o "/tmp/ncu_$cfg" python3 "$REPO/bench/profile_one.py" "$cfg" \
    > "/tmp/ncu_$cfg.log" 2>&1 || tail -3 "/tmp/ncu_$cfg.log"
  ncu -i "/tmp/ncu_$cfg.ncu-rep" --page details > "$OUT/ncu_$cfg.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Registers Per|Achieved Occupancy|Eligible Warps|Grid Size|Executed Ipc A" "$OUT/ncu_$cfg.txt" | head -14
done
