#!/usr/bin/env bash
# Prepared in session 41, not run: step 1 of the dequantizing loader's plan
# (bench/logs/2026-11-27_session41_plan_ds_dequant_loader.md, NOTES item 65 f) - tools/
# wgmma_transa_probe.cu checks wgmma m64n64k16 bf16 with A MN-major (V^T from a 128-byte-swizzled
# bf16 tile, compute.cuh's v_desc form) against float64. Seconds of device time; put it in front
# of the next call that builds anything.
#   run tool: command "bash bench/experiments/run_2026-11-28_dq_step1.sh", kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I src -o /tmp/wgmma_transa_probe \
  tools/wgmma_transa_probe.cu > "$OUT/transa_build.log" 2>&1 || { cat "$OUT/transa_build.log"; exit 1; }
/tmp/wgmma_transa_probe | tee "$OUT/transa_probe.txt"
echo "probe rc ${PIPESTATUS[0]}; total $(( $(date +%s) - start )) s"
