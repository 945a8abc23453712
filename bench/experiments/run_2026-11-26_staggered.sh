#!/usr/bin/env bash
# One device call for session 28's staggered wide kernel (bench/experiments/README.md, NOTES item
# 49 f-h): builds of main, main + the staggered patch (order A) and main + its order-B variant, the
# wide kernels' tests on order A's build, and a 2-round A/B of fp8 h128 b64 and sparse 656 h128 b64
# with per-layer times. About 8-9 minutes. (Order B's tests: AB_TEST="sb:..." in a second call.)
#   run tool: command "bash bench/experiments/run_2026-11-26_staggered.sh", carry [".whl"]
# Then, in a second call, the sanitizers on the patched tree (synccheck above all: named barriers):
#   patch -p1 < bench/experiments/2026-11-26_mla_wide_staggered.patch && SANITIZE_TOOLS="memcheck
#   synccheck racecheck" SANITIZE_ARGS=--mla-only JAXPAGED_CUDA_ARCHS=90a bash bench/device_run.sh sanitize
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false JAXPAGED_CUDA_ARCHS=90a
start=$(date +%s)
# (test_fp8's wide cases: more than 16 query rows in pages of >= 64; test_mla_sparse's 656 bf16 ones;
# test_adversarial's MLA cases take the wide kernels for fp8 and 656-byte rows at 32+ rows)
# (order A - the staggered patch - and order B, its O^T(t - 1) before the softmax: NOTES item 49 f)
AB_TEST='st:tests/test_fp8.py tests/test_mla_sparse.py tests/test_adversarial.py -k "mla or 656 or sparse" -n 8' \
AB_TEST_LIMIT=180 OUT="$OUT" bash bench/ab.sh 2 base=. st=patch:bench/experiments/2026-11-26_mla_wide_staggered.patch \
  sb=patch:bench/experiments/2026-11-26_mla_wide_staggered_order_b.patch -- \
  --only mla_fp8_h128_b64_ctx4k sparse_h128_b64_topk2048 --ours-step \
  2>&1 | grep -v "^builds"
mkdir -p /tmp/abres && mv "$OUT"/base_* "$OUT"/st_* "$OUT"/sb_* "$OUT"/build_*.log /tmp/abres/ 2>/dev/null
echo "total $(( $(date +%s) - start )) s"
