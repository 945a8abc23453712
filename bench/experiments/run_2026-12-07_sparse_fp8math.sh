#!/usr/bin/env bash
# Session 59 (NOTES item 84 e): mla_decode_sparse(..., fp8_math=True) - the wide kernel's fp8 mode
# (kDF) over index lists. One call (carry .whl): the build (sm_90a), the MLA cases of test_fp8 and
# test_mla_sparse (the new sparse fp8_math tests among them), then bench.py with peers on the
# sparse fp8-math configs and two sparse 656 configs of the bf16 / f16 readings beside them.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_into /tmp/jp_sparse8
TESTS_N=12 tests_of_build 200 "mla" test_mla_sparse.py test_fp8.py
timeout $(( 585 - ($(date +%s) - start) )) python3 "$R/bench/bench.py" --out "$OUT/bench" --only \
  sparse_fp8math_h128_b64_topk2048 sparse_fp8math_h128_b128_topk2048 sparse_fp8math_h64_b64_topk2048 \
  sparse_fp8math_h16_b64_topk2048 sparse_fp8math_h128_sq2_b32_topk2048 sparse_h128_b64_topk2048 \
  sparse_f16_h128_b64_topk2048 > "$OUT/bench.log" 2>&1
grep -E "^sparse|Error|rror:" "$OUT/bench.log" | cut -c1-175
echo "total $(( $(date +%s) - start )) s"
