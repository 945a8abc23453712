#!/usr/bin/env bash
# Session 57, last call (carry .whl; ~250 s of the session's last ~320 s of device time): the kDF
# tests on HEAD's build (b8569a6, the factor change, with the tests' tight bound: call 4 had run
# them with the f16pack variant's looser one), then one timing round of HEAD against
# 2026-12-04_kdf_eparallel.patch (the four E_g exponents at once from the maxima's bits, one test
# for growth, instead of four serial frexp + branch chains) at h128 b64 4K.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
AB_TEST="base:tests/test_fp8.py -n 8 -k 'fp8_math and 656 or scales_across or negative_and_nan'" AB_TEST_LIMIT=120 \
OUT=$OUT bash bench/ab.sh 1 base=. eparallel=patch:$E/2026-12-04_kdf_eparallel.patch -- \
  --ours-step --only mla_656fp8math_h128_b64_ctx4k > "$OUT/ab_run.log" 2>&1
grep -E "^==|^tests|^FAILED|mla_656|BUILD|PATCH|total|builds" "$OUT/ab_run.log" | cut -c1-130 | tail -12
echo "total $(( $(date +%s) - start )) s"
