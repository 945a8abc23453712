#!/usr/bin/env bash
# One device call (session 30): tools/ds_producer_probe.cu v3 - the v2 pipeline with and without an
# L2 bulk prefetch of each row two tiles ahead, on a pool past L2 (2^17 rows) and one inside it (2^14).
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I src -o /tmp/ds_producer_probe \
  tools/ds_producer_probe.cu > "$OUT/probe_build.log" 2>&1
for n in 131072 16384; do timeout 120 /tmp/ds_producer_probe $n; done 2>&1 | tee "$OUT/probe.log"
