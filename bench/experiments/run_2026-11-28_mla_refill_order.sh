#!/usr/bin/env bash
# Session 35: the TMA loader refilling buffer 0's groups first (L, R, rope, then buffer 1's R, L,
# rope; 2026-11-28_mla_refill_buf0_first.patch) instead of in the order they fall free (NOTES item
# 23). The reading (item 55 / session 35): a pair's refills land at a per-SM rate, roughly in the
# order asked, so buffer 1's R, freed first, delays buffer 0's - which the next S0 waits for.
# Block 0's pair period (the timeline probe) of both, the context scan of both, the variant's tests.
#   run tool: command "bash bench/experiments/run_2026-11-28_mla_refill_order.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
source $E/trace_lib.sh
OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 head=. rf=patch:$E/2026-11-28_mla_refill_buf0_first.patch \
  > "$OUT/ab_build.log" 2>&1 &
trace_build . /tmp/trace_head "$OUT/trace_build_head.log" &
wait
trace_build /tmp/ab_src_rf /tmp/trace_rf "$OUT/trace_build_rf.log"
grep -E "builds|FAILED" "$OUT/ab_build.log"
echo "builds done $(( $(date +%s) - start )) s"
for v in head rf; do
  trace_report /tmp/trace_$v /tmp/tr_$v.bin "$OUT/trace_$v.txt"
  head -1 "$OUT/trace_$v.txt"
  grep -E "LD next pair|next S0|P0V0_R done|P1V1_L done" "$OUT/trace_$v.txt"
done
ctx_scan head rf
variant_tests rf test_mla_decode.py test_plan.py
echo "total $(( $(date +%s) - start )) s"
