#!/usr/bin/env bash
# Session 44, call 1 (kind nvidia-h100-x1, carry .whl): NOTES session 43's (0) and (1).
#  - builds base (the working tree) and rope (+ 2026-11-28_ds_f16_rope_k.patch), the timeline probe beside;
#  - base with rope's test file: the float16 reading's edge tests (never run on a GPU) and the
#    huge-rope-keys test (expected to FAIL on base: k from the latent only);
#  - rope: every float16-reading test of test_fp8 (the new one expected to pass);
#  - the timeline of the kH sparse pair beside the bf16-reading sparse pair and the kH dense pair
#    (Hq 128, B 64, 4096 keys; top-2048 for sparse);
#  - serving_ops.py's write_kv timing (interleaved pairs; never run on a GPU) in the time left.
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
(trace_build . /tmp/trace "$OUT/trace_build.log"; echo "trace build rc $?") &
tp=$!
OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 base=. rope=patch:$E/2026-11-28_ds_f16_rope_k.patch > "$OUT/ab_build.log" 2>&1
grep -E "builds|FAILED" "$OUT/ab_build.log"
TR=/tmp/ab_src_rope/tests
(cd /tmp && PYTHONPATH=/tmp/ab_base:/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider -n 8 -rf \
  $TR/test_fp8.py -k "round_to_f16 or range_edges or huge_rope" > "$OUT/tests_base_edges.log" 2>&1)
echo "base + rope's tests (huge_rope expected to fail): rc $? - $(tail -1 "$OUT/tests_base_edges.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests_base_edges.log" | cut -c1-200 | head
# (the float16 reading's cases: ids ending "656 f16]", or names with "f16_"; -k cannot tell f16 from bf16)
mapfile -t IDS < <(cd /tmp && PYTHONPATH=/tmp/ab_rope:/tmp/site python3 -m pytest -q --collect-only -p no:cacheprovider \
  $TR/test_fp8.py 2>/dev/null | grep -E "656 f16\]|f16_")
echo "rope: ${#IDS[@]} float16-reading tests"
(cd /tmp && PYTHONPATH=/tmp/ab_rope:/tmp/site timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 -rf \
  "${IDS[@]}" > "$OUT/tests_rope.log" 2>&1)
echo "rope's f16 tests: rc $? - $(tail -1 "$OUT/tests_rope.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests_rope.log" | cut -c1-200 | head
wait $tp
TRACE_LINES=40
trace_run f16_sparse /tmp/trace 128 64 4096 --cache=656f16 --topk=2048
trace_run bf16_sparse /tmp/trace 128 64 4096 --cache=656 --topk=2048
trace_run f16_dense /tmp/trace 128 64 4096 --cache=656f16
left=$(( 570 - ($(date +%s) - start) ))
if (( left > 60 )); then
  R=$(pwd)
  (cd /tmp && PYTHONPATH=/tmp/ab_base:/tmp/site timeout $left python3 "$R/bench/serving_ops.py" --out "$OUT/serving" \
    --variants write_kv --tokens 16384 --no-sinks > "$OUT/serving.log" 2>&1)
  echo "serving_ops rc $?"; tail -15 "$OUT/serving.log"
fi
(cd "$OUT" && tar -czf logs.tar.gz ab ab_build.log tests_*.log trace_build.log serving* 2>/dev/null)
echo "total $(( $(date +%s) - start )) s"
