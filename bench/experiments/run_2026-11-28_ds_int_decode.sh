#!/usr/bin/env bash
# Prepared in session 42, not run: the 656-byte rows' integer decode in the wide kernel's kDs path
# (2026-11-28_ds_int_decode.patch, NOTES item 67): e4m3 -> f16 of value / 2^8 by shift and mask,
# the 2^8 in the scale, cvt only for fragments with a NaN byte or a huge scale; Q^T in the evens-
# then-odds order. Two calls on one warm machine (name kind nvidia-h100-x1, carry .whl):
#   PART=1: the conversion-rate probe (seconds), base (the working tree) and int built, int's
#           656 / sparse GPU tests (stop on a failure).
#   PART=2: (at once, AB_REUSE) 2 rounds of base and int, per call and per layer, on the 656
#           configs; then int with the peers beside (FlashMLA's time, our errors).
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
P=bench/experiments/2026-11-28_ds_int_decode.patch
CONFIGS="sparse_h128_b64_topk2048 sparse_h64_b64_topk2048 sparse_h16_b64_topk2048 mla_656_h128_b64_ctx4k"
if [[ ${PART:-1} == 1 ]]; then
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/convert_rate_probe tools/convert_rate_probe.cu \
    > "$OUT/convert_rate_build.log" 2>&1 && /tmp/convert_rate_probe | tee "$OUT/convert_rate.txt"
  AB_TEST="int:tests/test_mla_sparse.py tests/test_fp8.py tests/test_adversarial.py tests/test_decode_loop.py -k '656 or sparse or ds or adversarial' -n 8 -x" \
    AB_TEST_LIMIT=300 OUT=$OUT/ab timeout 560 bash bench/ab.sh 0 base=. "int=patch:$P" > "$OUT/ab_build.log" 2>&1
  grep -E "builds|FAILED|tests of|^(FAILED|ERROR)" "$OUT/ab_build.log"
else
  AB_REUSE=1 OUT=$OUT/ab timeout 420 bash bench/ab.sh 2 base=. "int=patch:$P" -- --ours-step --only $CONFIGS \
    > "$OUT/ab_run.log" 2>&1
  grep -E "^==|^(mla|sparse)" "$OUT/ab/ab.log" | cut -c1-150
  (cd /tmp && PYTHONPATH=/tmp/ab_int:/tmp/site timeout 130 python3 /tmp/ab_src_int/bench/bench.py --out "$OUT/peers" \
    --only sparse_h128_b64_topk2048 mla_656_h128_b64_ctx4k 2>&1 | grep -E "^(mla|sparse)|flash|Error" | cut -c1-200)
fi
echo "total $(( $(date +%s) - start )) s"
