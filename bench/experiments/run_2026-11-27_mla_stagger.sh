#!/usr/bin/env bash
# NOTES item 54 a: are the MLA kernel's blocks in phase? Every block runs the same pairs of tiles,
# so all 132 ask for their refills in the same ~2500-cycle window of each ~6900-cycle pair period
# and then none for the rest of it (item 53 c); DRAM would then idle for part of each period.
# Test: delay the start of partition `part` by (part % MOD) * CYCLES (2026-11-27_mla_stagger{2,4}
# .patch: half or quarter periods) and time per call against HEAD (abtmp/base).
#   run tool: command "bash bench/experiments/run_2026-11-27_mla_stagger.sh", carry [".whl", "abtmp"]
set -uo pipefail
source bench/experiments/run_lib.sh
CFGS=${CFGS:-"mla_h128_b64_ctx4k mla_h128_b128_ctx8k mla_h64_b128_ctx4k"}
OUT=/tmp/about bash bench/ab.sh ${ROUNDS:-2} base=abtmp/base s2=patch:$E/2026-11-27_mla_stagger2.patch \
  s4=patch:$E/2026-11-27_mla_stagger4.patch -- --only $CFGS > /tmp/ab_run.log 2>&1
cp /tmp/about/ab.log "$OUT/ab.log"
grep -E "builds|FAILED" /tmp/ab_run.log
grep -E "^(==|mla)" "$OUT/ab.log" | cut -c1-100
