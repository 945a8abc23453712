#!/usr/bin/env bash
# Prepared in session 60, one call (~250 s) after run_2026-12-08_wide_prologue.sh on the same
# machine (its patched trees /tmp/ab_src_NAME): the probe's timelines (sparse kDF
# h128 b64 top-2048 and dense kDF 4096 keys) of HEAD and of each variant named in TRACE_VARIANTS
# (default "qn see": run_2026-12-08_combined.sh's trees; session 60 named "qc a2"), to read a block's fixed costs: sequence start -> queries ready (marks
# 61 -> 62) and epilogue start -> stored (79 -> 80; since 608c3be the factors' work is in 79 -> 81,
# and the report still names 81 "sums met"). HEAD's epilogue is the compact one now: session 59's
# traces (bench/logs/2026-11-29_h200_session59_call6_*) are the code before it.
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
read -r -a VS <<< "${TRACE_VARIANTS:-qn see}"
trace_build . /tmp/trace_head "$OUT/trace_build_head.log" &
for v in "${VS[@]}"; do
  [[ -d /tmp/ab_src_$v ]] && trace_build /tmp/ab_src_$v /tmp/trace_$v "$OUT/trace_build_$v.log" &
done
wait
echo "trace builds: $(( $(date +%s) - start )) s"
for v in head "${VS[@]}"; do
  [[ -x /tmp/trace_$v/jaxpaged_mla_trace ]] || { echo "no probe for $v"; continue; }
  TRACE_LINES=4 TRACE_LIMIT=60 trace_run sparse_${v} /tmp/trace_$v 128 64 4096 --cache=656fp8math --topk=2048
  TRACE_LINES=4 TRACE_LIMIT=60 trace_run dense_${v} /tmp/trace_$v 128 64 4096 --cache=656fp8math
done
echo "total $(( $(date +%s) - start )) s"
