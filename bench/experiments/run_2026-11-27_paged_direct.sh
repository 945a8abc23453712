#!/usr/bin/env bash
# For the next session (NOTES item 52 i; built, not run): pure paged decode without a plan and
# without the tile list at any wave count (bench/experiments/2026-11-26_paged_decode_direct_env.patch:
# JAXPAGED_PAGED_DIRECT=1), per call, 2 rounds against the default (the list when blocks need more
# than one wave) in one build: uniform lengths (fp8 b64: the list kernel's ~5 us; with a plan 0.215
# against 0.226 ms) and varied ones (decode_varlen_b128, where the longest-first order may matter).
#   run tool: command "bash bench/experiments/run_2026-11-27_paged_direct.sh", carry [".whl"]
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
REPO=$(pwd)
patch -p1 --quiet < bench/experiments/2026-11-26_paged_decode_direct_env.patch || { echo "PATCH FAILED"; exit 1; }
export JAXPAGED_CUDA_ARCHS=90a
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
python3 -m pip install --no-build-isolation --no-deps . > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
cd /tmp
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
CFGS=${CFGS:-"decode_fp8_b64_ctx4k decode_b64_ctx4k decode_b256_ctx1k decode_varlen_b128 decode_mha_b32_ctx4k decode_window_b64_ctx32k"}
for r in 1 2; do
  for v in 0 1; do
    echo "== JAXPAGED_PAGED_DIRECT=$v round $r"
    JAXPAGED_PAGED_DIRECT=$v timeout 150 python3 "$REPO/bench/bench.py" --ours-only --out "/tmp/direct_${v}_$r" --only $CFGS 2>&1 |
      grep -E "^decode" | tee -a "$OUT/direct_ab.log"
  done
done
