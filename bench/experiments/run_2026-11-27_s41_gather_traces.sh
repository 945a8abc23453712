#!/usr/bin/env bash
# Session 41, one short call: what bounds the sparse gather's copy issue (NOTES item 65: ~3,500
# cycles a tile for the loader's thread 0, on the pair's critical path). Timeline probe
# (tools/mla_trace.cu --cache=656 --topk=2048, Hq 128, B 64, 4096 keys) of HEAD with the rows in
# DRAM (the bench's case) and with a 128-page pool (5.4 MB of rows: L2-resident) - an issue time
# that drops with L2 hits says latency x requests in flight, one that stays says the L1TEX pipe -
# and of item 59 k's gather along rows (2026-11-29_sparse_gather_rows.patch, rebased on the marks;
# ~1/3 of the wavefronts; lost 4-7% in item 60 d) on the DRAM case.
#   run tool: command "bash bench/experiments/run_2026-11-27_s41_gather_traces.sh", kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
rm -rf /tmp/src_rows && mkdir -p /tmp/src_rows && tar --exclude=./.whl --exclude=./.git -cf - . | tar -xf - -C /tmp/src_rows
patch -d /tmp/src_rows -p1 --quiet < $E/2026-11-29_sparse_gather_rows.patch || { echo "PATCH FAILED"; exit 1; }
trace_build . /tmp/trace_base "$OUT/trace_build_base.log" &
trace_build /tmp/src_rows /tmp/trace_rows "$OUT/trace_build_rows.log" &
wait
echo "builds: $(( $(date +%s) - start )) s"
TRACE_LINES=42 trace_run base_dram /tmp/trace_base 128 64 4096 --cache=656 --topk=2048
TRACE_LINES=42 trace_run base_l2 /tmp/trace_base 128 64 4096 128 --cache=656 --topk=2048
TRACE_LINES=42 trace_run rows_dram /tmp/trace_rows 128 64 4096 --cache=656 --topk=2048
TRACE_LINES=42 trace_run rows_l2 /tmp/trace_rows 128 64 4096 128 --cache=656 --topk=2048
cd "$OUT" && tar -czf trace_build_logs.tar.gz trace_build_*.log && rm -f trace_build_*.log
echo "total $(( $(date +%s) - start )) s"
