#!/usr/bin/env bash
# One device call for session 27's 656-byte wide experiment (bench/experiments/README.md):
# the probe's scaled S^T / O^T checks, then a build of main and of main + the patch, the patch's
# 656 tests on its build, and an A/B of the dense and sparse 656 configs (2 rounds). ~8-9 minutes.
#   run tool: command "bash bench/experiments/run_2026-11-26_ds_wide.sh", carry [".whl"]
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false JAXPAGED_CUDA_ARCHS=90a
start=$(date +%s)
# (the probe builds beside the package builds: nvcc of one unit)
( nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I src -o /tmp/wgmma_rega_probe \
    tools/wgmma_rega_probe.cu > "$OUT/probe_build.log" 2>&1 && /tmp/wgmma_rega_probe 16 > "$OUT/probe.log" 2>&1
  echo "probe rc $?" >> "$OUT/probe.log" ) &
probe=$!
AB_TEST='ds:tests/test_fp8.py tests/test_mla_sparse.py tests/test_decode_loop.py -k "656 or ds or sparse" -n 8' \
AB_TEST_LIMIT=200 OUT="$OUT" bash bench/ab.sh 2 base=. ds=patch:bench/experiments/2026-11-26_mla_ds_wide.patch -- \
  --only mla_656_h128_b64_ctx4k sparse_h128_b64_topk2048 sparse_h64_b64_topk2048 sparse_h128_sq2_b32_topk2048 \
  2>&1 | grep -v "^builds"
wait "$probe"
grep -E "PASS|FAIL|rc " "$OUT/probe.log"
mkdir -p /tmp/abres && mv "$OUT"/base_* "$OUT"/ds_* "$OUT"/build_*.log /tmp/abres/ 2>/dev/null
echo "total $(( $(date +%s) - start )) s"
