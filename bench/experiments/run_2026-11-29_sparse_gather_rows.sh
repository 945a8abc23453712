#!/usr/bin/env bash
# Prepared in session 38, not run: issue 18's sparse 656 gather with lanes along a row
# (2026-11-29_sparse_gather_rows.patch, NOTES item 59 j: warp w copies rows 16w..16w+15 one at a
# time, 512 contiguous bytes a copy instruction instead of 32 bytes of 16 rows; predicted up to
# ~8% on sparse_h128_b64 if the L1TEX wavefronts are half the gather's ~0.7 us a tile). The sparse
# instance compiles with the same registers and no spills (168, as HEAD).
# (1) base and rows built (bench/ab.sh), rows' tests first (test_mla_sparse, test_fp8 -k 656 or
#     sparse), then 2 rounds of the sparse configs per call and per layer;
# (2) memcheck of rows' MLA driver cases (the sparse lists among them) in the time left.
#   run tool: command "bash bench/experiments/run_2026-11-29_sparse_gather_rows.sh", carry [".whl"], kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
repo=$(pwd)
AB_TEST='rows:tests/test_mla_sparse.py -n 8 -x' AB_TEST_LIMIT=150 OUT=$OUT/ab timeout 430 bash bench/ab.sh 2 base=. \
  rows=patch:$E/2026-11-29_sparse_gather_rows.patch -- --ours-step --only sparse_h128_b64_topk2048 \
  sparse_h64_b64_topk2048 sparse_h128_sq2_b32_topk2048 sparse_h128_b128_topk2048 > "$OUT/ab_run.log" 2>&1
grep -E "builds|FAILED|tests of" "$OUT/ab_run.log"
grep -E "^==|^sparse" "$OUT/ab/ab.log" | cut -c1-150
echo "timing done $(( $(date +%s) - start )) s"
left=$(( 585 - ($(date +%s) - start) ))
if (( left > 120 )); then
  (cmake -S /tmp/ab_src_rows -B /tmp/san_rows -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_SANITIZE_DRIVER=ON \
     -DJAXPAGED_CUDA_ARCHS=90a > /tmp/san_build.log 2>&1 && ninja -C /tmp/san_rows jaxpaged_sanitize >> /tmp/san_build.log 2>&1) &&
    timeout $(( 585 - ($(date +%s) - start) )) compute-sanitizer --tool memcheck --error-exitcode 9 \
      /tmp/san_rows/jaxpaged_sanitize --mla-only > "$OUT/memcheck_rows.log" 2>&1
  echo "memcheck rc $? $(grep 'ERROR SUMMARY' "$OUT/memcheck_rows.log" | tail -1)"
fi
echo "total $(( $(date +%s) - start )) s"
