#!/usr/bin/env bash
# Session 53, one call (~400 s, no wheels needed): the sanitizer driver of HEAD (with its new case,
# 64 fp8 D = 256 sequences x 4 KV heads: the occupancy split's 256-block grid) under memcheck over
# all the paged cases, and racecheck (full, not --quick) of the new case and of the driver's last
# four paged cases (bf16 400-sequence decode: owed since session 51, item 76 c); beside them the
# GPU tests of HEAD's paged op (test_fp8, test_paged_attention, test_plan, "not mla"). Carry .whl.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
(JAXPAGED_CUDA_ARCHS=90a timeout 300 nice python3 -m pip install --no-build-isolation --no-deps --target /tmp/jp_head . \
   > "$OUT/build.log" 2>&1; echo "package build rc $?") &
pkg_pid=$!
nvidia-smi --query-gpu=name,clocks.max.mem --format=csv,noheader | tee "$OUT/gpu.txt"
ln -sfn "$(pwd)" /tmp/ab_src_head
sanitizer_build head
wait $san_pid $pkg_pid
echo "builds $(( $(date +%s) - start )) s"
cd /tmp || exit 1
left=$(( 585 - ($(date +%s) - start) ))
timeout $left compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/san_head/jaxpaged_sanitize --paged-only \
  > "$OUT/sanitize_memcheck.log" 2>&1 &
mem_pid=$!
timeout $left compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/san_head/jaxpaged_sanitize --paged-only \
  --only=occupancy "--only=400 sequences" > "$OUT/sanitize_racecheck.log" 2>&1 &
race_pid=$!
PYTHONPATH=/tmp/jp_head:/tmp/site timeout $left python3 -m pytest -q -p no:cacheprovider -n 6 \
  "$REPO/tests/test_fp8.py" "$REPO/tests/test_paged_attention.py" "$REPO/tests/test_plan.py" -k "not mla" \
  > "$OUT/tests.log" 2>&1
echo "tests rc $? - $(tail -1 "$OUT/tests.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -8
wait $race_pid
echo "racecheck rc $? $(grep -c ' ok$' "$OUT/sanitize_racecheck.log") ok | $(grep -E 'SUMMARY' "$OUT/sanitize_racecheck.log" | tail -1) | $(tail -1 "$OUT/sanitize_racecheck.log")"
wait $mem_pid
echo "memcheck rc $? $(grep -c ' ok$' "$OUT/sanitize_memcheck.log") ok | $(grep -E 'ERROR SUMMARY' "$OUT/sanitize_memcheck.log" | tail -1) | $(tail -1 "$OUT/sanitize_memcheck.log")"
grep -iE "fail|error" "$OUT/sanitize_memcheck.log" "$OUT/sanitize_racecheck.log" | grep -v "0 errors\|0 failed" | head
echo "total $(( $(date +%s) - start )) s"
