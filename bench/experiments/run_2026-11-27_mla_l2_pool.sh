#!/usr/bin/env bash
# NOTES item 54 g: ours beside FlashMLA with every tile an L2 hit (l2_pool_bench.py: the block
# table folded onto 128 pages), then the same configs as the bench runs them, in one call.
#   run tool: command "bash bench/experiments/run_2026-11-27_mla_l2_pool.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
JAXPAGED_CUDA_ARCHS=90a python3 -m pip install --no-build-isolation --no-deps --target /tmp/jp . > "$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
export PYTHONPATH=/tmp/jp:/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
CFGS=${CFGS:-"mla_h128_b64_ctx4k mla_h64_b128_ctx4k mla_h128_b128_ctx8k"}
cd /tmp
python3 "$OLDPWD/bench/experiments/l2_pool_bench.py" $CFGS 2>&1 | grep -E "pool|Error|error" | tee "$OUT/l2_pool.log"
python3 "$OLDPWD/bench/bench.py" --out /tmp/bench_out --only $CFGS 2>&1 | grep -E "^mla|Error|error" | tee -a "$OUT/l2_pool.log"
echo "total: $(( $(date +%s) - start )) s"
