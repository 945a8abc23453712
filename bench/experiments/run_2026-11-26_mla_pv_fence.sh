#!/usr/bin/env bash
# Session 32 (NOTES item 53), one call (carry .whl and abtmp): HEAD (abtmp/base) against
# v1 = warpgroup 1's P1 V1_R from shared memory (2026-11-26_mla_pv1r_from_smem.patch) and
# v12 = v1 + warpgroup 0's P0 hand-off pinned ahead of the O_L rescale (+ 2026-11-26_mla_p0_handoff_first.patch):
# the timeline probe of v12, then ROUNDS (1) of per call + per layer.
set -uo pipefail
source bench/experiments/run_lib.sh
source $E/trace_lib.sh
bash bench/ab.sh 0 base=abtmp/base v1=patch:$E/2026-11-26_mla_pv1r_from_smem.patch \
  v12=patch:$E/2026-11-26_mla_pv1r_from_smem.patch+$E/2026-11-26_mla_p0_handoff_first.patch > "$OUT/ab_build.log" 2>&1
cat "$OUT/ab_build.log" | tail -3
trace_variants "$OUT" v1 v12
echo "builds and traces: $(( $(date +%s) - start )) s"
CFGS=${CFGS:-"mla_h128_b64_ctx4k mla_h128_b128_ctx8k mla_h64_b128_ctx4k mla_h16_b128_ctx4k_page64 mla_h128_b4_ctx4k mla_h128_sq2_causal_b64_ctx4k"}
AB_REUSE=1 bash bench/ab.sh ${ROUNDS:-1} base=abtmp/base v1=. v12=. -- --only $CFGS --ours-step > "$OUT/ab_run.log" 2>&1
grep -E "^(==|mla)" "$OUT/ab.log"
echo "total: $(( $(date +%s) - start )) s"
