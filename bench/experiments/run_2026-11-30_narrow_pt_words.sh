#!/usr/bin/env bash
# Prepared in session 54 (NOTES item 79 e), one call (carry .whl; ~560 s): the narrow fp8 MLA
# kernel's P'^T written as one 4-byte word per query a lane (2026-11-29_narrow_pt_words.patch: the
# hi and lo bytes of a lane's two slots converted in pairs by cvt e4m3x2, one pair swapped with
# lane ^ 4, one byte_perm; was 16 byte stores a lane) - item 79 b's timeline had P'^T's writing
# at ~450 of a warpgroup's ~3,900 cycles a tile (marks 104 -> 105). The layout is checked on the
# CPU by tools/mla_fp8_narrow_layout_model.py. The new tree's MLA fp8 tests first (93, ~260 s at
# -n 12, its timeline probe built beside them), 2 alternating rounds against HEAD on
# mla_fp8_h16_b128_ctx4k, the new tree's timeline (105 - 104 should fall), memcheck of its MLA
# cases with the time left.
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
variants="base=. pt=patch:$E/2026-11-29_narrow_pt_words.patch"
# shellcheck disable=SC2086
build_with_sanitizer pt $variants
trace_build /tmp/ab_src_pt /tmp/trace_pt "$OUT/trace_build_pt.log" &  # (beside the tests, not the timing)
trace_pid=$!
(cd /tmp && PYTHONPATH=/tmp/ab_pt:/tmp/site timeout 300 python3 -m pytest -q -p no:cacheprovider -n 12 \
  /tmp/ab_src_pt/tests/test_fp8.py /tmp/ab_src_pt/tests/test_mla_decode.py -k "fp8 and mla" > "$OUT/tests_pt.log" 2>&1)
echo "tests of pt: rc $? - $(tail -1 "$OUT/tests_pt.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests_pt.log" | head -5
wait $trace_pid
# shellcheck disable=SC2086
AB_REUSE=1 OUT=$OUT/ab timeout 90 bash bench/ab.sh 2 $variants -- --ours-step \
  --only mla_fp8_h16_b128_ctx4k > "$OUT/ab_run.log" 2>&1
grep -E "^==|^mla" "$OUT/ab/ab.log" | cut -c1-110
echo "timing done $(( $(date +%s) - start )) s"
TRACE_LINES=0 TRACE_LIMIT=70 trace_run pt /tmp/trace_pt 16 128 4096 --cache=fp8
grep -E "WG0 \(narrow|  10[2-8] " "$OUT/trace_pt.txt" | head -8
sanitize_mla memcheck pt 590
echo "total $(( $(date +%s) - start )) s"
