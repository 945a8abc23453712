#!/usr/bin/env bash
# Session 49: checks of the landed row index (NOTES item 73 g / 74 a) on HEAD: the package and
# the sanitizer driver built; memcheck and racecheck (--quick) of the driver's paged cases in the
# background beside pytest -n 8 of every test file that reaches the paged tile kernel.
#   run tool: command "bash bench/experiments/run_2026-11-28_row_index_checks.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
build_with_sanitizer new new=patch:  # (patch: with none = a copy of the tree, which the driver build and the tests need)
left=$(( 585 - ($(date +%s) - start) ))
for tool in memcheck racecheck; do
  quick=$([[ $tool == racecheck ]] && echo --quick)
  (cd /tmp && timeout $left compute-sanitizer --tool $tool --error-exitcode 9 /tmp/san_new/jaxpaged_sanitize $quick \
    --paged-only > "$OUT/sanitize_$tool.log" 2>&1) &
done
(cd /tmp && PYTHONPATH=/tmp/ab_new:/tmp/site timeout $left python3 -m pytest -q -p no:cacheprovider -n 8 \
  /tmp/ab_src_new/tests/test_paged_attention.py /tmp/ab_src_new/tests/test_fp8.py /tmp/ab_src_new/tests/test_plan.py \
  /tmp/ab_src_new/tests/test_decode_loop.py /tmp/ab_src_new/tests/test_adversarial.py -k "not mla" \
  > "$OUT/tests_new.log" 2>&1)
echo "tests: rc $? - $(tail -1 "$OUT/tests_new.log")"
grep -E "^FAILED|Error" "$OUT/tests_new.log" | head -5
wait
for tool in memcheck racecheck; do
  echo "$tool: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitize_$tool.log" | tail -1) | $(tail -1 "$OUT/sanitize_$tool.log")"
done
echo "total $(( $(date +%s) - start )) s"
