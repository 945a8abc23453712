#!/usr/bin/env bash
# Ran (session 42) on the working tree with bench/experiments/2026-11-27_ds_dequant_loader_v1.patch applied
# (`patch -p1 < ...` first); main does not carry it (NOTES item 66). Logs: bench/logs/2026-11-27_session42_dq_loader.log.
# Session 42: the dequantizing loader's timeline (NOTES item 66): tools/mla_trace.cu at the
# sparse_h128_b64_topk2048 shape with JAXPAGED_MLA_DS_DQ=1 and =0, and the dense 656 shape with DQ=1.
#   run tool: command "bash bench/experiments/run_2026-11-27_s42_dq_trace.sh", kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
trace_build . /tmp/trace_dq "$OUT/trace_build.log" || { tail -5 "$OUT/trace_build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
JAXPAGED_MLA_DS_DQ=1 TRACE_LINES=60 trace_run dq1_sparse /tmp/trace_dq 128 64 4096 --cache=656 --topk=2048
JAXPAGED_MLA_DS_DQ=0 TRACE_LINES=30 trace_run dq0_sparse /tmp/trace_dq 128 64 4096 --cache=656 --topk=2048
JAXPAGED_MLA_DS_DQ=1 TRACE_LINES=30 trace_run dq1_dense /tmp/trace_dq 128 64 4096 --cache=656
echo "total $(( $(date +%s) - start )) s"
