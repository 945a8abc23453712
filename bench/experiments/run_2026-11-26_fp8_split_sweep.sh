#!/usr/bin/env bash
# Session 31 (NOTES item 52 e): the KV split count swept on the fp8 paged configs (and bf16 b64)
# with bench/experiments/2026-11-24_paged_kv_splits_env.patch (JAXPAGED_KV_SPLITS=n forces n),
# ours only, per call and per layer (with the plan), one build.
#   run tool: command "bash bench/experiments/run_2026-11-26_fp8_split_sweep.sh", carry [".whl"]
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
REPO=$(pwd)
patch -p1 --quiet < bench/experiments/2026-11-24_paged_kv_splits_env.patch || { echo "PATCH FAILED"; exit 1; }
export JAXPAGED_CUDA_ARCHS=90a
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
python3 -m pip install --no-build-isolation --no-deps . > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
cd /tmp
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
CFGS=${CFGS:-"decode_fp8_b64_ctx4k decode_fp8_h64_b32_ctx8k decode_fp8_b8_ctx32k"}
for n in ${SPLITS:-default 1 2 3 4 6}; do
  echo "== splits $n"
  if [[ $n == default ]]; then unset JAXPAGED_KV_SPLITS; else export JAXPAGED_KV_SPLITS=$n; fi
  timeout 100 python3 "$REPO/bench/bench.py" --ours-only --out "/tmp/sweep_$n" --only $CFGS --ours-step 2>&1 |
    grep -E "^decode" | tee -a "$OUT/split_sweep.log"
done
