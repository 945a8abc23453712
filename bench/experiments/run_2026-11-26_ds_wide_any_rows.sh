#!/usr/bin/env bash
# One device call (session 29, NOTES item 50 d): the wide kernel on 656-byte rows for any number of
# query rows (bench/experiments/2026-11-26_mla_ds_wide_any_rows.patch: DeepSeek-V3.2 at TP 8 has 16
# heads, which took the wgmma kernel) against main, on sparse_h16_b64_topk2048 and
# mla_656_h16_b128_ctx4k; the patched tree's 656 / sparse tests, memcheck of main's sanitizer driver
# (--mla-only) beside them, and one bench run of the sparse h16 config with FlashMLA.
#   run tool: command "bash bench/experiments/run_2026-11-26_ds_wide_any_rows.sh", carry [".whl"]
OUT=${OUT:-/tmp/jaxpaged-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false JAXPAGED_CUDA_ARCHS=90a
REPO=$(pwd); san=/tmp/jp-san
( cmake -S "$REPO" -B $san -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_SANITIZE_DRIVER=ON -DJAXPAGED_CUDA_ARCHS=90a > $OUT/san_build.log 2>&1 && nice ninja -C $san jaxpaged_sanitize >> $OUT/san_build.log 2>&1 && timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $san/jaxpaged_sanitize --mla-only > $OUT/memcheck.log 2>&1; echo "memcheck rc $?" >> $OUT/memcheck.log ) &
AB_TEST='dw:tests/test_fp8.py tests/test_mla_sparse.py -k "656 or sparse or ds" -n 6' AB_TEST_LIMIT=200 bash bench/ab.sh 0 base=. dw=patch:bench/experiments/2026-11-26_mla_ds_wide_any_rows.patch 2>&1 | grep -v "^builds"
wait
tail -2 $OUT/memcheck.log
AB_REUSE=1 bash bench/ab.sh 2 base=. dw=patch:bench/experiments/2026-11-26_mla_ds_wide_any_rows.patch -- --only sparse_h16_b64_topk2048 mla_656_h16_b128_ctx4k --ours-step 2>&1 | grep -v "^builds"
cd /tmp && PYTHONPATH=/tmp/ab_dw:/tmp/site timeout 100 python3 $REPO/bench/bench.py --only sparse_h16_b64_topk2048 --out $OUT/peer 2>&1 | grep -E "^sparse|rror" | head
