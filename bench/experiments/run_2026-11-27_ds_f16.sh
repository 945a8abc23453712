#!/usr/bin/env bash
# Session 43: the float16 reading of 656-byte rows on the wide kernel (kH: f16(value x f16(scale)),
# one mul.f16x2 a pair where the bf16 reading takes cvt, 2 HADD2.F32, 2 FMUL and an F2FP pack).
# base = abtmp/base (git archive HEAD; carry abtmp and .whl); h16 = the working tree with
# 2026-11-27_ds_f16_force.patch (ds_dequant="bfloat16" calls forced onto the kH kernel, so the bench
# and the tests' bf16 reference see it: errors then show the two readings' difference, ~2^-9).
#   PART=1: build both, h16's 656 / sparse tests (failures expected only where the readings differ
#           by more than the tolerances: scales past f16's range), 1 round A/B.
#   PART=2: 2 more rounds, FlashMLA beside.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
P=bench/experiments/2026-11-27_ds_f16_force.patch
CONFIGS="sparse_h128_b64_topk2048 sparse_h64_b64_topk2048 sparse_h16_b64_topk2048 mla_656_h128_b64_ctx4k"
if [[ ${PART:-1} == 1 ]]; then
  AB_TEST="h16:tests/test_mla_sparse.py tests/test_fp8.py -k '656 or sparse or ds' -n 8" \
    AB_TEST_LIMIT=170 OUT=$OUT/ab timeout 330 bash bench/ab.sh 0 base=abtmp/base "h16=patch:$P" > "$OUT/ab_build.log" 2>&1
  grep -E "builds|FAILED|tests of|passed|failed" "$OUT/ab_build.log" | cut -c1-300
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/ab/tests_h16.log" | cut -c1-300 | head -30
  AB_REUSE=1 OUT=$OUT/ab1 timeout 200 bash bench/ab.sh 1 base=abtmp/base "h16=patch:$P" -- --ours-step \
    --only sparse_h128_b64_topk2048 mla_656_h128_b64_ctx4k > "$OUT/ab1_run.log" 2>&1
  grep -E "^==|^(mla|sparse)" "$OUT/ab1/ab.log" | cut -c1-150
else
  AB_REUSE=1 OUT=$OUT/ab timeout 420 bash bench/ab.sh 2 base=abtmp/base "h16=patch:$P" -- --ours-step --only $CONFIGS \
    > "$OUT/ab_run.log" 2>&1
  grep -E "^==|^(mla|sparse)" "$OUT/ab/ab.log" | cut -c1-150
  (cd /tmp && PYTHONPATH=/tmp/ab_h16:/tmp/site timeout 100 python3 /tmp/ab_src_h16/bench/bench.py --out "$OUT/peers" \
    --only sparse_h128_b64_topk2048 2>&1 | grep -E "^(mla|sparse)|flash|Error" | cut -c1-200)
fi
echo "total $(( $(date +%s) - start )) s"
