#!/usr/bin/env bash
# One device call (session 30): tools/ds_producer_probe.cu v2 (loads a tile ahead, issued before
# the conversion of the tile in hand), then memcheck and racecheck of the sanitizer driver's paged
# cases on the tree with the fp8 paged f16 path (NOTES item 50 k / 51).
#   run tool: command "bash bench/experiments/run_2026-11-26_probe_v2_and_paged_sanitize.sh"
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I src -o /tmp/ds_producer_probe \
  tools/ds_producer_probe.cu > "$OUT/probe_build.log" 2>&1 && timeout 120 /tmp/ds_producer_probe 2>&1 | tee "$OUT/probe.log"
SANITIZE_TOOLS="memcheck racecheck" SANITIZE_ARGS=--paged-only JAXPAGED_CUDA_ARCHS=90a \
  bash bench/device_run.sh sanitize 2>&1 | tail -8
