#!/usr/bin/env bash
# Prepared in session 44 (NOTES item 69 d / next-session (0)-(2)), not run. One call (kind
# nvidia-h100-x1, carry .whl): the checks 3c26a97 did not get, and whether its halves pay.
#   - builds HEAD (base) and rowonly (2026-11-29_sparse_row_only.patch: one copy a row, the tile
#     handed back whole after O^T's last k-step's values are in registers, the natural O^T order),
#     the sanitizer driver and the timeline probe beside;
#   - memcheck of HEAD's MLA cases (sparse junk ids among them);
#   - HEAD's sparse tests: test_mla_sparse, and test_adversarial / decode_loop / sharding -k sparse;
#   - the timeline of HEAD's sparse pair (f16 and bf16 readings);
#   - 2 rounds base vs rowonly on three sparse configs (per call and per layer).
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
(cmake -S . -B /tmp/san -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_SANITIZE_DRIVER=ON -DJAXPAGED_CUDA_ARCHS=90a \
   > "$OUT/san_build.log" 2>&1 && nice ninja -C /tmp/san jaxpaged_sanitize >> "$OUT/san_build.log" 2>&1; echo "sanitizer build rc $?") &
sp=$!
(trace_build . /tmp/trace "$OUT/trace_build.log"; echo "trace build rc $?") &
tp=$!
OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 base=. rowonly=patch:$E/2026-11-29_sparse_row_only.patch > "$OUT/ab_build.log" 2>&1
grep -E "builds|FAILED" "$OUT/ab_build.log"
T=$(pwd)/tests
(cd /tmp && PYTHONPATH=/tmp/ab_base:/tmp/site timeout 180 python3 -m pytest -q -p no:cacheprovider -n 8 -rf \
  $T/test_mla_sparse.py $T/test_adversarial.py $T/test_decode_loop.py $T/test_sharding.py -k "sparse" \
  > "$OUT/tests_base.log" 2>&1)
echo "sparse tests of HEAD: rc $? - $(tail -1 "$OUT/tests_base.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests_base.log" | cut -c1-200 | head
wait $sp $tp
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/san/jaxpaged_sanitize --mla-only > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $? $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
TRACE_LINES=45 trace_run f16_sparse /tmp/trace 128 64 4096 --cache=656f16 --topk=2048
TRACE_LINES=3 trace_run bf16_sparse /tmp/trace 128 64 4096 --cache=656 --topk=2048
AB_REUSE=1 OUT=$OUT/ab timeout $(( 585 - ($(date +%s) - start) )) bash bench/ab.sh 2 base=. \
  rowonly=patch:$E/2026-11-29_sparse_row_only.patch -- --ours-step \
  --only sparse_f16_h128_b64_topk2048 sparse_h128_b128_topk2048 sparse_h64_b64_topk2048 > "$OUT/ab_run.log" 2>&1
grep -E "^==|^sparse" "$OUT/ab/ab.log" | cut -c1-110
(cd "$OUT" && tar -czf logs.tar.gz ab_build.log san_build.log trace_build.log tests_base.log memcheck.log trace_*.txt 2>/dev/null)
echo "total $(( $(date +%s) - start )) s"
