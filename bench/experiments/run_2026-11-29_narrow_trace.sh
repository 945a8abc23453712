#!/usr/bin/env bash
# Session 53, one short call (~200 s, no wheels): the narrow fp8 MLA kernel's first timeline
# (marks 100-110, fp8_narrow.cuh): mla_fp8_h16_b128_ctx4k's shape from DRAM and with its tiles held
# in L2 (pool of 128 pages). If a warpgroup's tile wait (110 -> 102) is short and its period close
# to its chain (110 -> 108) in both, the kernel is bound by its two chains, not by the bytes.
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
trace_build . /tmp/trace_head "$OUT/trace_build.log" || { tail -20 "$OUT/trace_build.log"; exit 1; }
echo "build $(( $(date +%s) - start )) s"
TRACE_LINES=40 trace_run narrow_dram /tmp/trace_head 16 128 4096 --cache=fp8
TRACE_LINES=40 trace_run narrow_l2 /tmp/trace_head 16 128 4096 128 --cache=fp8
echo "total $(( $(date +%s) - start )) s"
