#!/usr/bin/env bash
# Prepared in session 37, not run. On HEAD plus 2026-11-28_paged_length_order_mends.patch (the
# review's mends of the list-free decode, NOTES item 58 f: a guard past 1024 sequences, the early
# exit for one-bucket batches, the search's early stop, no call in the LARGE instances):
# (1) compute-sanitizer memcheck and racecheck of the paged cases of tools/sanitize_driver.cu,
#     among them the multi-wave pure decode cases (250 varied, 256 equal, fp8 250: the blocks' own
#     order; 400: the list);
# (2) the multi-wave tests and test_plan on that build;
# (3) ncu of the write_rows kernel alone on 16K bf16 tokens at random slots into 4 GiB (issue 17's
#     write target, item 58 b: 79.5% of copy BW): DRAM bytes and throughput, waves, occupancy,
#     stalls - before changing the kernel.
# If the mends pass, commit the patch (git apply) with the measured lines in NOTES.
#   run tool: command "bash bench/experiments/run_2026-11-28_sanitize_and_write_ncu.sh", carry [".whl"]
set -uo pipefail
REPO=$(pwd)
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
start=$(date +%s)
patch -p1 --quiet < bench/experiments/2026-11-28_paged_length_order_mends.patch || { echo "PATCH FAILED"; exit 1; }
SANITIZE_TOOLS="memcheck racecheck" SANITIZE_ARGS=--paged-only SANITIZE_LIMIT=220 JAXPAGED_CUDA_ARCHS=90a \
  timeout 330 bash bench/device_run.sh sanitize > "$OUT/sanitize_run.log" 2>&1
tail -6 "$OUT/sanitize_run.log"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT"/sanitize_*.log | head -8
echo "sanitize done $(( $(date +%s) - start )) s"
cd /tmp
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
timeout 100 python3 -m pytest -q -p no:cacheprovider -n 8 "$REPO/tests/test_paged_attention.py" "$REPO/tests/test_fp8.py" \
  "$REPO/tests/test_plan.py" -k "several_waves or paged" > "$OUT/tests.log" 2>&1
echo "tests rc $?: $(tail -1 "$OUT/tests.log")"
timeout 120 ncu --set full -k regex:write_rows -c 1 -f -o /tmp/write_rows python3 "$REPO/bench/experiments/write_rows_once.py" \
  > "$OUT/write_ncu.log" 2>&1 || tail -5 "$OUT/write_ncu.log"
ncu -i /tmp/write_rows.ncu-rep --page details > "$OUT/write_rows_ncu.txt" 2>&1
grep -E "Duration|DRAM Throughput|Memory Throughput|Waves Per SM|Achieved Occupancy|Eligible Warps|L2 Hit|Grid Size|Registers" \
  "$OUT/write_rows_ncu.txt" | head -16
# (the device tool returns at most 8 files: keep the logs that matter)
grep -qi error "$OUT/sanitize_build.log" 2>/dev/null && tail -5 "$OUT/sanitize_build.log"
mv "$OUT/gpu.txt" "$OUT/sanitize_build.log" /tmp/ 2>/dev/null
[[ -s "$OUT/write_rows_ncu.txt" ]] && mv "$OUT/write_ncu.log" /tmp/ 2>/dev/null
ls "$OUT"
echo "total $(( $(date +%s) - start )) s"
