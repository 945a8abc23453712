#!/usr/bin/env bash
# Session 32 (NOTES item 53): the Hopper MLA kernel's timeline probe on mla_h128_b64_ctx4k's shape
# (tools/mla_trace.cu, tools/mla_trace_report.py), and any shapes in TRACE_SHAPES ("HEADS,BATCH,KV_LEN"
# separated by spaces; session 32 also ran "64,128,4096 128,128,8192"). No wheels needed.
#   run tool: command "bash bench/experiments/run_2026-11-26_mla_trace.sh"
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
source bench/experiments/trace_lib.sh
trace_build . /tmp/trace "$OUT/trace_build.log" || { tail -30 "$OUT/trace_build.log"; exit 1; }
for shape in 128,64,4096 ${TRACE_SHAPES:-}; do
  set -- ${shape//,/ }
  trace_report /tmp/trace "$OUT/trace_h$1_b$2_l$3.bin" "$OUT/trace_h$1_b$2_l$3.txt" $1 $2 $3
  cat "$OUT/trace_h$1_b$2_l$3.txt"
done
