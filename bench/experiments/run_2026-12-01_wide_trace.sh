#!/usr/bin/env bash
# Prepared in session 40 (NOTES item 63 h), not run: the timeline probe on the wide fp8 kernel
# (sm90/fp8_wide.cuh's marks, ids 60-80, and fp8_ring.cuh's loader marks 90-95;
# tools/mla_trace.cu --cache=fp8math|fp8, tools/mla_trace_report.py's wide report). Asks where a pair's
# cycles go in the fp8-math mode (kF8) and in the f16 path on mla_fp8math_h128_b64_ctx4k's shape (Hq
# 128, B 64, 4096 keys, per-tensor e4m3 combined rows, 64-token pages): per block, the median over
# steady pairs of each mark's offset from warpgroup 0's pair start (both compute warpgroups: the raw
# tile's full wait, S^T issued / done, the vote and maxima barriers, P^T stored, each tile's O^T issued
# / done and its buffer handed back; the loader's empty waits and TMA issues of the next pair), the
# median pair period, and each sequence's start, queries, epilogue and store. One call: the probe's
# build (every kernel with JAXPAGED_MLA_TRACE), then one traced call per cache (TRACE_CACHES: default
# "fp8math fp8"; "bf16" adds the wgmma kernel's trace). The traced build's compute warpgroups spill
# a few more bytes than the product's (ptxas: kF8 32 / 48 bytes of spill stores / loads, was 24 / 28;
# all outside the pair loop), so its times are the probe's, not the bench's.
#   run tool: command "bash bench/experiments/run_2026-12-01_wide_trace.sh", carry [".whl"], kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
trace_build . /tmp/trace "$OUT/trace_build.log" || { tail -30 "$OUT/trace_build.log"; echo "BUILD FAILED"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
for cache in ${TRACE_CACHES:-fp8math fp8}; do
  echo "== $cache"
  timeout 120 /tmp/trace/jaxpaged_mla_trace "$OUT/trace_$cache.bin" 128 64 4096 --cache=$cache \
    > "$OUT/trace_$cache.txt" 2>&1 || { cat "$OUT/trace_$cache.txt"; continue; }
  python3 tools/mla_trace_report.py "$OUT/trace_$cache.bin" >> "$OUT/trace_$cache.txt" 2>&1
  cat "$OUT/trace_$cache.txt"
done
echo "total $(( $(date +%s) - start )) s"
