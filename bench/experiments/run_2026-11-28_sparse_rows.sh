#!/usr/bin/env bash
# Session 44 (NOTES item 69): sparse 656-byte lists gathered as whole rows by bulk copies (the
# tile's rows as they are, 656 bytes apart: MlaRawTile<true>) instead of 21 cp.async a thread into
# the swizzled blocks; with the f16 reading's rope-scaling bound (item 68 g's patch, applied).
# Two calls on one warm machine (kind nvidia-h100-x1, carry .whl and abtmp = git archive of the parent):
#   PART=1: builds base (abtmp/base) and new (the working tree), the sanitizer driver and the
#           timeline probe beside; new's sparse and float16-reading tests; memcheck --mla-only;
#           the timeline of new's sparse pairs (f16 and bf16 readings).
#   PART=2: 2 rounds base vs new on the sparse configs (per call and per layer), then new's
#           sparse configs with FlashMLA beside.
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
if [[ ${PART:-1} == 1 ]]; then
  (cmake -S . -B /tmp/san_new -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_SANITIZE_DRIVER=ON -DJAXPAGED_CUDA_ARCHS=90a \
     > "$OUT/san_build.log" 2>&1 && nice ninja -C /tmp/san_new jaxpaged_sanitize >> "$OUT/san_build.log" 2>&1; \
     echo "sanitizer build rc $?") &
  sp=$!
  (trace_build . /tmp/trace "$OUT/trace_build.log"; echo "trace build rc $?") &
  tp=$!
  OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 base=abtmp/base new=. > "$OUT/ab_build.log" 2>&1
  grep -E "builds|FAILED" "$OUT/ab_build.log"
  T=$(pwd)/tests
  (cd /tmp && PYTHONPATH=/tmp/ab_new:/tmp/site timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 -rf \
    $T/test_mla_sparse.py $T/test_fp8.py -k "sparse or (quantized_caches and 656 and not bf16) or f16_ or nan_bytes" \
    > "$OUT/tests_new.log" 2>&1)
  echo "tests of new: rc $? - $(tail -1 "$OUT/tests_new.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/tests_new.log" | cut -c1-200 | head -20
  wait $sp $tp
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/san_new/jaxpaged_sanitize --mla-only \
    > "$OUT/memcheck_new.log" 2>&1
  echo "memcheck rc $? $(grep 'ERROR SUMMARY' "$OUT/memcheck_new.log" | tail -1) | $(tail -1 "$OUT/memcheck_new.log")"
  TRACE_LINES=12
  trace_run f16_sparse /tmp/trace 128 64 4096 --cache=656f16 --topk=2048
  trace_run bf16_sparse /tmp/trace 128 64 4096 --cache=656 --topk=2048
  left=$(( 560 - ($(date +%s) - start) ))
  (cd /tmp && PYTHONPATH=/tmp/ab_new:/tmp/site timeout $left python3 -m pytest -q -p no:cacheprovider -n 8 -rf \
    $T/test_adversarial.py -k "sparse" > "$OUT/tests_adv.log" 2>&1)
  echo "adversarial sparse of new: rc $? - $(tail -1 "$OUT/tests_adv.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/tests_adv.log" | cut -c1-200 | head -10
  (cd "$OUT" && tar -czf logs1.tar.gz ab ab_build.log san_build.log trace_build.log tests_*.log memcheck_new.log trace_*.txt 2>/dev/null)
else
  AB_REUSE=1 OUT=$OUT/ab timeout 300 bash bench/ab.sh 2 base=abtmp/base new=. -- --ours-step \
    --only sparse_h128_b64_topk2048 sparse_f16_h128_b64_topk2048 sparse_h128_b128_topk2048 sparse_f16_h64_b64_topk2048 \
    sparse_h128_sq2_b32_topk2048 > "$OUT/ab_run.log" 2>&1
  grep -E "^==|^sparse" "$OUT/ab/ab.log" | cut -c1-150
  R=$(pwd)
  (cd /tmp && PYTHONPATH=/tmp/ab_new:/tmp/site timeout $(( 570 - ($(date +%s) - start) )) python3 "$R/bench/bench.py" \
    --out "$OUT/peers" --only sparse_f16_h128_b64_topk2048 sparse_f16_h128_b128_topk2048 sparse_f16_h64_b64_topk2048 \
    sparse_h128_b64_topk2048 sparse_h128_b128_topk2048 sparse_h64_b64_topk2048 sparse_h128_sq2_b32_topk2048 \
    sparse_f16_h16_b64_topk2048 > "$OUT/peers.log" 2>&1)
  grep -E "^sparse|Error" "$OUT/peers.log" | cut -c1-220
  (cd "$OUT" && tar -czf logs2.tar.gz ab ab_run.log peers peers.log 2>/dev/null)
fi
echo "total $(( $(date +%s) - start )) s"
