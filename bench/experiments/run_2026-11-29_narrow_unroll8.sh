#!/usr/bin/env bash
# Prepared in session 53 (NOTES item 78 f (2)), one call (carry .whl; ~500 s): the narrow fp8 MLA
# kernel's V^T transposer unrolled by 8 instead of 4 (2026-11-29_narrow_transposer_unroll8.patch;
# sm_90a: 168 registers, no spills, as HEAD). The transposer is 49-59% of each compute chain and
# the kernel is chain-bound (item 78 f), so a shorter transposer should show 1:1 in the period.
# 3 alternating rounds against HEAD on mla_fp8_h16_b128_ctx4k (bf16 h16 page 64 as a control: it
# runs the wgmma kernel, unchanged); the new tree's MLA fp8 tests; both trees' timelines (the
# period and the 104 -> 105 leg); memcheck of the new tree's MLA cases with the time left.
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
variants="base=. new=patch:$E/2026-11-29_narrow_transposer_unroll8.patch"
# shellcheck disable=SC2086
build_with_sanitizer new $variants
# shellcheck disable=SC2086
AB_REUSE=1 OUT=$OUT/ab timeout 150 bash bench/ab.sh 3 $variants -- --ours-step \
  --only mla_fp8_h16_b128_ctx4k mla_h16_b128_ctx4k_page64 > "$OUT/ab_run.log" 2>&1
grep -E "^==|^mla" "$OUT/ab/ab.log" | cut -c1-110
echo "timing done $(( $(date +%s) - start )) s"
(cd /tmp && PYTHONPATH=/tmp/ab_new:/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider -n 6 \
  /tmp/ab_src_new/tests/test_fp8.py /tmp/ab_src_new/tests/test_mla_decode.py -k "fp8 and mla" > "$OUT/tests_new.log" 2>&1)
echo "tests of new: rc $? - $(tail -1 "$OUT/tests_new.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests_new.log" | head -8
for v in base new; do trace_build /tmp/ab_src_$v /tmp/trace_$v "$OUT/trace_build_$v.log" & done
wait
for v in base new; do
  TRACE_LINES=0 trace_run $v /tmp/trace_$v 16 128 4096 --cache=fp8
  grep -E "WG0 \(narrow|  104 |  105 " "$OUT/trace_$v.txt" | head -6 | sed "s/^/$v: /"
done
sanitize_mla memcheck new
echo "total $(( $(date +%s) - start )) s"
