#!/usr/bin/env bash
# Session 54, one call (carry .whl; ~500 s): the narrow fp8 MLA kernel's O^T product with V^T's
# fragments in registers (the wgmma register A operand, from ldmatrix .trans + byte_perm of the raw
# tile), replacing the stmatrix transposer into a shared-memory V^T (item 78 f: 49-59% of each
# tile's chain; 2-way conflicted stores). Variants against HEAD (base):
#   ks2 = 2026-11-29_narrow_rs_ks2.patch: fragments per k-step, double-buffered (0 spills);
#   s4  = 2026-11-29_narrow_rs_ks2_s4.patch: the same with 4 raw stages (the freed V^T's 64 KiB).
# (2026-11-29_narrow_rs_mb.patch - fragments per m-block, the first two loaded before the P'^T
# barrier - spills 44 bytes at sm_90a's 168 registers: left out of this call.)
# Both variants' MLA fp8 tests side by side, 2 alternating rounds on mla_fp8_h16_b128_ctx4k (bf16
# h16 page 64 as a control: the wgmma kernel, unchanged), ks2's timeline, memcheck of ks2's MLA
# driver cases with the time left.
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
variants="base=. ks2=patch:$E/2026-11-29_narrow_rs_ks2.patch s4=patch:$E/2026-11-29_narrow_rs_ks2_s4.patch"
# shellcheck disable=SC2086
build_with_sanitizer ks2 $variants
trace_build /tmp/ab_src_ks2 /tmp/trace_ks2 "$OUT/trace_build_ks2.log" &
trace_pid=$!
tpids=()
for v in ks2 s4; do
  (cd /tmp && PYTHONPATH=/tmp/ab_$v:/tmp/site timeout 170 python3 -m pytest -q -p no:cacheprovider -n 5 \
    /tmp/ab_src_$v/tests/test_fp8.py /tmp/ab_src_$v/tests/test_mla_decode.py -k "fp8 and mla" > "$OUT/tests_$v.log" 2>&1
   echo "tests of $v: rc $? - $(tail -1 "$OUT/tests_$v.log")"; grep -E "^(FAILED|ERROR)" "$OUT/tests_$v.log" | head -5) &
  tpids+=($!)
done
wait "${tpids[@]}"
echo "tests done $(( $(date +%s) - start )) s"
# shellcheck disable=SC2086
AB_REUSE=1 OUT=$OUT/ab timeout 200 bash bench/ab.sh 2 $variants -- --ours-step \
  --only mla_fp8_h16_b128_ctx4k mla_h16_b128_ctx4k_page64 > "$OUT/ab_run.log" 2>&1
grep -E "^==|^mla" "$OUT/ab/ab.log" | cut -c1-110
echo "timing done $(( $(date +%s) - start )) s"
wait $trace_pid
TRACE_LINES=0 TRACE_LIMIT=40 trace_run ks2 /tmp/trace_ks2 16 128 4096 --cache=fp8
grep -E "WG0 \(narrow|  10[2-8] " "$OUT/trace_ks2.txt" | head -8
sanitize_mla memcheck ks2
echo "total $(( $(date +%s) - start )) s"
