#!/usr/bin/env bash
# Session 32 (NOTES item 53 h), one call (carry .whl and abtmp): try_wait with a suspend-time hint
# (the thread sleeps until the phase completes, as FlashMLA's waits do: NANOSLEEP.SYNCS in SASS)
# instead of spinning: ld = the MLA TMA loader's empty waits only
# (2026-11-26_mla_loader_wait_suspended.patch), all = every mbar_wait
# (2026-11-26_mbar_wait_suspended_all.patch), against HEAD (abtmp/base); the timeline probe of both,
# then ROUNDS (2) per call.
set -uo pipefail
source bench/experiments/run_lib.sh
source $E/trace_lib.sh
OUT=/tmp/about bash bench/ab.sh 0 base=abtmp/base ld=patch:$E/2026-11-26_mla_loader_wait_suspended.patch \
  all=patch:$E/2026-11-26_mbar_wait_suspended_all.patch > /tmp/ab_build.log 2>&1
tail -2 /tmp/ab_build.log
trace_variants /tmp ld all
echo "builds and traces: $(( $(date +%s) - start )) s"
CFGS=${CFGS:-"mla_h128_b64_ctx4k mla_h128_b128_ctx8k mla_h64_b128_ctx4k mla_h16_b128_ctx4k_page64 mla_h128_sq2_causal_b64_ctx4k mla_fp8_h128_b64_ctx4k mla_fp8_h16_b128_ctx4k sparse_h128_b64_topk2048"}
OUT=/tmp/about AB_REUSE=1 bash bench/ab.sh ${ROUNDS:-2} base=abtmp/base ld=. all=. -- --only $CFGS > /tmp/ab_run.log 2>&1
cp /tmp/about/ab.log "$OUT/ab.log"
grep -E "^(==|mla|sparse)" "$OUT/ab.log"
echo "total: $(( $(date +%s) - start )) s"
