#!/usr/bin/env bash
# One device call (NOTES item 50 k): main against bench/experiments/2026-11-26_paged_fp8_f16_math.patch
# (the paged tile kernel's fp8 register path on f16 tensor cores for bf16 queries): the patched
# tree's fp8 / paged / sinks tests (test_paged_fp8_queries_of_any_magnitude among them), then a
# 2-round A/B of the three fp8 paged configs with per-layer times. About 8 minutes.
#   run tool: command "bash bench/experiments/run_2026-11-27_paged_fp8_f16.sh", carry [".whl"]
# If it wins: the sanitizer's paged cases on the patched tree (memcheck, racecheck: the paged tile
# kernel is racecheck-clean, NOTES item 36 c) before landing.
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false JAXPAGED_CUDA_ARCHS=90a
AB_TEST='f16:tests/test_fp8.py tests/test_paged_attention.py tests/test_sinks.py -n 8' AB_TEST_LIMIT=240 \
  OUT="$OUT" bash bench/ab.sh 2 base=. f16=patch:bench/experiments/2026-11-26_paged_fp8_f16_math.patch -- \
  --only decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k decode_fp8_h64_b32_ctx8k --ours-step 2>&1 | grep -v "^builds"
