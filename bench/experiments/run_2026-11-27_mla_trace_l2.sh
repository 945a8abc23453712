#!/usr/bin/env bash
# NOTES item 54 c (diagnostic, timeline only): DRAM or the SM's own feed? The same shapes traced
# with the block table naming only 128 distinct pages (9 MB: the tiles come from L2) beside the
# usual all-distinct pages: mla_h128_b64_ctx4k and mla_h64_b128_ctx4k (DRAM-bound at 88%). If
# the refill leg (a group's refill to the next S's landing, ~2400 cycles at h128) shrinks with L2
# data, DRAM's loaded latency sets it; if not, the path into one SM does.
#   run tool: command "bash bench/experiments/run_2026-11-27_mla_trace_l2.sh"
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
trace_build . /tmp/trace_base /tmp/trace_build_base.log || tail -20 /tmp/trace_build_base.log
echo "build: $(( $(date +%s) - start )) s"
for shape in "128 64 4096" "64 128 4096"; do
  for pool in 0 128; do
    set -- $shape
    name=h$1_b$2_pool$pool
    args=("$@")
    [[ $pool != 0 ]] && args+=("$pool")
    trace_report /tmp/trace_base /tmp/tr_$name.bin "$OUT/trace_$name.txt" "${args[@]}"
    echo "$name: $(head -1 "$OUT/trace_$name.txt")"
  done
done
echo "total: $(( $(date +%s) - start )) s"
