#!/usr/bin/env bash
# Prepared in session 37, not run: (1) compute-sanitizer memcheck and racecheck of the paged cases
# of tools/sanitize_driver.cu, among them session 37's multi-wave pure decode (400 / 300 / 1100
# sequences: the blocks' own longest-first order, NOTES item 58 d, and the list past 1024);
# (2) ncu of the write_rows kernel alone on 16K bf16 tokens at random slots into 4 GiB (issue 17's
# write target, item 58 b: 79.5% of copy BW) - DRAM bytes and throughput, the launch's waves,
# occupancy and the warp stalls - before changing it.
#   run tool: command "bash bench/experiments/run_2026-11-28_sanitize_and_write_ncu.sh", carry [".whl"]
set -uo pipefail
REPO=$(pwd)
OUT=${OUT:-/tmp/jaxpaged-out}
SANITIZE_TOOLS="memcheck racecheck" SANITIZE_ARGS=--paged-only SANITIZE_LIMIT=240 JAXPAGED_CUDA_ARCHS=90a \
  timeout 420 bash bench/device_run.sh sanitize > "$OUT/sanitize_run.log" 2>&1
tail -8 "$OUT/sanitize_run.log"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|paged .*(400|300|1100)" "$OUT"/sanitize_*.log | head -20
cd /tmp
timeout 150 ncu --set full -k regex:write_rows -c 1 -f -o /tmp/write_rows python3 "$REPO/bench/experiments/write_rows_once.py" \
  > "$OUT/write_ncu.log" 2>&1 || tail -5 "$OUT/write_ncu.log"
ncu -i /tmp/write_rows.ncu-rep --page details > "$OUT/write_rows_ncu.txt" 2>&1
grep -E "Duration|DRAM Throughput|Memory Throughput|dram__bytes|Waves Per SM|Achieved Occupancy|Eligible Warps|L2 Hit|Grid Size|Registers" \
  "$OUT/write_rows_ncu.txt" | head -16
