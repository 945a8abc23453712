#!/usr/bin/env bash
# Session 38, call 1: HEAD + 2026-11-28_paged_length_order_mends.patch (the review's mends of the
# list-free decode) + 2026-11-28_paged_list_free_limit_env.patch (JAXPAGED_LIST_FREE_SEQS; unset,
# the limit stays 256, so the default build is HEAD + mends):
# (1) compute-sanitizer memcheck and racecheck of the paged driver cases (multi-wave decode among
#     them), beside the package build;
# (2) the multi-wave tests and test_plan on that build;
# (3) list_free_scan.py in the time left: list (=1) against the blocks' own search (=1024),
#     alternating, S = 128-1024, bf16 and fp8.
#   run tool: command "bash bench/experiments/run_2026-11-27_s38_sanitize_scan.sh", carry [".whl"]
set -uo pipefail
REPO=$(pwd)
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
start=$(date +%s)
for p in 2026-11-28_paged_length_order_mends.patch 2026-11-28_paged_list_free_limit_env.patch; do
  patch -p1 --quiet < bench/experiments/$p || { echo "PATCH FAILED $p"; exit 1; }
done
SANITIZE_TOOLS="memcheck racecheck" SANITIZE_ARGS=--paged-only SANITIZE_LIMIT=220 JAXPAGED_CUDA_ARCHS=90a \
  timeout 330 bash bench/device_run.sh sanitize > "$OUT/sanitize_run.log" 2>&1
tail -4 "$OUT/sanitize_run.log"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT"/sanitize_*.log | head -8
echo "sanitize done $(( $(date +%s) - start )) s"
grep -qi error "$OUT/sanitize_build.log" 2>/dev/null && tail -5 "$OUT/sanitize_build.log"
mv "$OUT/gpu.txt" "$OUT/sanitize_build.log" /tmp/ 2>/dev/null
cd /tmp
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
timeout 110 python3 -m pytest -q -p no:cacheprovider -n 8 "$REPO/tests/test_paged_attention.py" "$REPO/tests/test_fp8.py" \
  "$REPO/tests/test_plan.py" -k "several_waves or plan" > "$OUT/tests.log" 2>&1
echo "tests rc $?: $(tail -1 "$OUT/tests.log")"
echo "tests done $(( $(date +%s) - start )) s"
for r in 1 2; do
  for lim in 1 1024; do
    left=$(( 585 - ($(date +%s) - start) ))
    (( left > 20 )) || break 2
    JAXPAGED_LIST_FREE_SEQS=$lim timeout $left python3 "$REPO/bench/experiments/list_free_scan.py" 2>&1 \
      | grep -E "us$|Error" | sed "s/^/scan /" >> "$OUT/list_free_scan.log"
  done
done
python3 "$REPO/$E/scan_table.py" "$OUT/list_free_scan.log" scan@1 scan@1024  # (the list, the own order)
ls "$OUT"
echo "total $(( $(date +%s) - start )) s"
