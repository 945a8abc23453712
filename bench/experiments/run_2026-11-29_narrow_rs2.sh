#!/usr/bin/env bash
# Session 54, second call (carry .whl; ~540 s). The first (run_2026-11-29_narrow_rs.sh) measured
# ks2 (V^T's fragments in registers, per k-step, double-buffered) at 0.088-0.090 against 0.100 ms
# per call; its tests ran out of time (46 of 93 passed, none failed). Here: ks2's MLA fp8 tests in
# full first, then 2 alternating rounds of base, ks2 and two deeper fragment pipelines:
#   ks2p = 2026-11-29_narrow_rs_ks2p.patch: ks2, each half's first two k-steps loaded ahead (half 0's
#          before the P'^T barrier, half 1's during the first half's promotion; 40 bytes of spills);
#   mb   = 2026-11-29_narrow_rs_mb.patch: per m-block (both k-steps) double-buffered (44 bytes);
# then ks2's timeline (the trace probe), if the time allows.
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
variants="base=. ks2=patch:$E/2026-11-29_narrow_rs_ks2.patch ks2p=patch:$E/2026-11-29_narrow_rs_ks2p.patch mb=patch:$E/2026-11-29_narrow_rs_mb.patch"
# shellcheck disable=SC2086
OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 $variants > "$OUT/ab_build.log" 2>&1 &
ab_pid=$!
sleep 8
trace_build /tmp/ab_src_ks2 /tmp/trace_ks2 "$OUT/trace_build_ks2.log" &
wait $ab_pid
grep -E "builds|FAILED" "$OUT/ab_build.log"
(cd /tmp && PYTHONPATH=/tmp/ab_ks2:/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider -n 8 \
  /tmp/ab_src_ks2/tests/test_fp8.py /tmp/ab_src_ks2/tests/test_mla_decode.py -k "fp8 and mla" > "$OUT/tests_ks2.log" 2>&1)
echo "tests of ks2: rc $? - $(tail -1 "$OUT/tests_ks2.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests_ks2.log" | head -5
echo "tests done $(( $(date +%s) - start )) s"
# shellcheck disable=SC2086
AB_REUSE=1 OUT=$OUT/ab timeout 170 bash bench/ab.sh 2 $variants -- --ours-step \
  --only mla_fp8_h16_b128_ctx4k > "$OUT/ab_run.log" 2>&1
grep -E "^==|^mla" "$OUT/ab/ab.log" | cut -c1-110
echo "timing done $(( $(date +%s) - start )) s"
wait
if (( $(date +%s) - start < 470 )); then
  TRACE_LINES=0 TRACE_LIMIT=$(( 580 - ($(date +%s) - start) )) trace_run ks2 /tmp/trace_ks2 16 128 4096 --cache=fp8
  grep -E "WG0 \(narrow|  10[2-8] " "$OUT/trace_ks2.txt" | head -8
fi
echo "total $(( $(date +%s) - start )) s"
