#!/usr/bin/env bash
# Prepared in session 42, not run: tools/convert_rate_probe.cu - the rate of the 656-byte rows'
# conversion (e4m3 -> bf16(value x scale)) per SMSP against 1-3 warps per SMSP, and of its parts
# (NOTES item 66 e, h). Seconds of device time; put it in front of a call that builds anything.
#   run tool: command "bash bench/experiments/run_2026-11-28_convert_rate.sh", kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/convert_rate_probe tools/convert_rate_probe.cu \
  > "$OUT/convert_rate_build.log" 2>&1 || { cat "$OUT/convert_rate_build.log"; exit 1; }
/tmp/convert_rate_probe | tee "$OUT/convert_rate.txt"
echo "probe rc ${PIPESTATUS[0]}; total $(( $(date +%s) - start )) s"
