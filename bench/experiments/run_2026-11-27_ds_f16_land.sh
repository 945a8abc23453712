#!/usr/bin/env bash
# Session 43: the landing check of ds_dequant="float16" (656-byte rows on the wide kernel's kH
# instances; the portable and CPU kernels' float16 reading). Two calls on one warm machine (kind
# nvidia-h100-x1, carry .whl and abtmp = git archive of the parent commit):
#   PART=1: builds new (the working tree) and base (abtmp/base), the sanitizer driver beside; new's
#           656 / sparse / workspace / decode-loop / adversarial-MLA tests; memcheck --mla-only.
#   PART=2: 2 rounds base vs new on the bf16-reading configs (unchanged kernels: the spread), then
#           new's float16 configs with the peers beside (FlashMLA's sparse decode on the same rows).
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
if [[ ${PART:-1} == 1 ]]; then
  (cmake -S . -B /tmp/san_new -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_SANITIZE_DRIVER=ON -DJAXPAGED_CUDA_ARCHS=90a \
     > /tmp/san_build.log 2>&1 && nice ninja -C /tmp/san_new jaxpaged_sanitize >> /tmp/san_build.log 2>&1; \
     echo "sanitizer build rc $?") &
  san_pid=$!
  OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 base=abtmp/base new=. > "$OUT/ab_build.log" 2>&1
  grep -E "builds|FAILED" "$OUT/ab_build.log"
  T=$(pwd)/tests
  (cd /tmp && PYTHONPATH=/tmp/ab_new:/tmp/site timeout 300 python3 -m pytest -q -p no:cacheprovider -n 8 \
    $T/test_fp8.py $T/test_mla_sparse.py $T/test_workspace.py $T/test_decode_loop.py $T/test_adversarial.py \
    -k "656 or sparse or workspace or mla" > "$OUT/tests_new.log" 2>&1)
  echo "tests of new: rc $? - $(tail -1 "$OUT/tests_new.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/tests_new.log" | head -20
  wait $san_pid
  timeout $(( 585 - ($(date +%s) - start) )) compute-sanitizer --tool memcheck --error-exitcode 9 \
    /tmp/san_new/jaxpaged_sanitize --mla-only > "$OUT/memcheck_new.log" 2>&1
  echo "memcheck rc $? $(grep 'ERROR SUMMARY' "$OUT/memcheck_new.log" | tail -1) | $(tail -1 "$OUT/memcheck_new.log")"
else
  T=$(pwd)/tests  # (PART=1's test run was cut at 300 s before it finished: the float16 ones first here)
  (cd /tmp && PYTHONPATH=/tmp/ab_new:/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider -n 8 \
    $T/test_fp8.py $T/test_mla_sparse.py $T/test_workspace.py $T/test_decode_loop.py -k "f16 or float16 or workspace" \
    > "$OUT/tests_f16.log" 2>&1)
  echo "tests of new (float16): rc $? - $(tail -1 "$OUT/tests_f16.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/tests_f16.log" | head -20
  AB_REUSE=1 OUT=$OUT/ab timeout 200 bash bench/ab.sh 2 base=abtmp/base new=. -- --ours-step \
    --only mla_656_h128_b64_ctx4k sparse_h128_b64_topk2048 > "$OUT/ab_run.log" 2>&1
  grep -E "^==|^(mla|sparse)" "$OUT/ab/ab.log" | cut -c1-150
  R=$(pwd)
  (cd /tmp && PYTHONPATH=/tmp/ab_new:/tmp/site timeout $(( 585 - ($(date +%s) - start) )) python3 "$R/bench/bench.py" \
    --out "$OUT/f16" --only mla_656f16_h128_b64_ctx4k mla_656f16_h16_b128_ctx4k sparse_f16_h128_b64_topk2048 \
    sparse_f16_h64_b64_topk2048 sparse_f16_h16_b64_topk2048 sparse_f16_h128_b128_topk2048 > "$OUT/f16.log" 2>&1)
  grep -E "^(mla|sparse)|Error" "$OUT/f16.log" | cut -c1-220
fi
echo "total $(( $(date +%s) - start )) s"
