#!/usr/bin/env bash
# Session 55 (NOTES item 80), one call (carry .whl; ~450 s): the narrow fp8 MLA kernel's S^T with
# three or four partial accumulators in turn (two or three groups of two k-steps in flight) instead
# of two. The ncu profile of session 55 put the kernel at 26% tensor-pipe activity and 46% issue
# activity - its chains' latency bounds it, not a pipe - and the timeline has S^T at ~775 of a
# warpgroup's ~3,900 cycles a tile for 18 products of ~16 tensor cycles each. The sums' order is
# unchanged, so each variant's outputs must equal the base's bit for bit (narrow_bitwise.py: the
# narrow check's cases, tails, page 128, s_q 2 causal, e5m2, junk entries, poisoned pages). Then
# 2 alternating rounds on mla_fp8_h16_b128_ctx4k, and the fp8 MLA tests of parts3 with the time left.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
variants="base=. s3=patch:$E/2026-11-29_narrow_s_parts3.patch s4=patch:$E/2026-11-29_narrow_s_parts4.patch"
# shellcheck disable=SC2086
OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 $variants > "$OUT/ab_build.log" 2>&1
tail -2 "$OUT/ab_build.log"
for v in base s3 s4; do
  mode=compare; [[ $v == base ]] && mode=save
  (cd /tmp && PYTHONPATH=/tmp/ab_$v:/tmp/site timeout 120 python3 -P "$REPO/$E/narrow_bitwise.py" $mode /tmp/nb_base.npz 2>&1 | tail -1)
done
# shellcheck disable=SC2086
AB_REUSE=1 OUT=$OUT/ab timeout 150 bash bench/ab.sh 2 $variants -- --ours-step \
  --only mla_fp8_h16_b128_ctx4k > "$OUT/ab_run.log" 2>&1
grep -E "^==|^mla" "$OUT/ab/ab.log" | cut -c1-110
echo "timing done $(( $(date +%s) - start )) s"
left=$(( 560 - ($(date +%s) - start) ))
(cd /tmp && PYTHONPATH=/tmp/ab_s3:/tmp/site timeout $left python3 -m pytest -q -p no:cacheprovider -n 12 \
  /tmp/ab_src_s3/tests/test_fp8.py /tmp/ab_src_s3/tests/test_mla_decode.py -k "fp8 and mla" > "$OUT/tests_s3.log" 2>&1)
echo "tests of s3 (${left} s): rc $? - $(tail -1 "$OUT/tests_s3.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests_s3.log" | head -5
echo "total $(( $(date +%s) - start )) s"
