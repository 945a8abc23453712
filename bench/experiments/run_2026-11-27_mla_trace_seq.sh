#!/usr/bin/env bash
# NOTES item 54 i (timeline only): where block 0's time outside the steady pairs goes - the probe's
# sequence marks (kernel start, each sequence's queries, epilogue) against the traced call's time,
# mla_h128_b64_ctx4k from DRAM and from L2 (128-page pool).
#   run tool: command "bash bench/experiments/run_2026-11-27_mla_trace_seq.sh"
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
trace_build . /tmp/trace_base /tmp/trace_build_base.log || tail -20 /tmp/trace_build_base.log
for pool in 0 128; do
  args=(128 64 4096)
  [[ $pool != 0 ]] && args+=("$pool")
  /tmp/trace_base/jaxpaged_mla_trace /tmp/tr_$pool.bin "${args[@]}"
  python3 tools/mla_trace_report.py /tmp/tr_$pool.bin > "$OUT/trace_seq_pool$pool.txt" 2>&1
  grep -E "^block|WG0 from" "$OUT/trace_seq_pool$pool.txt"
done
