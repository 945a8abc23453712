#!/usr/bin/env bash
# NOTES item 55: the queries by TMA from the loader thread (the first sequence's asked for before
# any tile) on top of the 16-byte-store epilogue (abtmp/epi = HEAD + that change) against the
# epilogue alone. Logs go straight to $OUT so a call cut off at its limit still returns them.
#   run tool: command "bash bench/experiments/run_2026-11-27_mla_qtma.sh", carry [".whl", "abtmp"]
#   PHASE=2: one more A/B round on the same builds (AB_REUSE) and the context scan of the new tree.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
CFGS=${CFGS:-"mla_h128_b64_ctx4k mla_h128_b128_ctx8k mla_h128_b4_ctx4k mla_h16_b128_ctx4k_page64 mla_h128_sq2_causal_b64_ctx4k"}
if [[ ${PHASE:-1} == 1 ]]; then
  AB_TEST="qtma:tests/test_mla_decode.py tests/test_plan.py -n 8 -x" AB_TEST_LIMIT=${AB_TEST_LIMIT:-200} \
    OUT=$OUT/ab timeout $(( 585 - ($(date +%s) - start) )) bash bench/ab.sh ${ROUNDS:-1} epi=abtmp/epi qtma=. \
    -- --only $CFGS > $OUT/ab_run.log 2>&1
else
  AB_REUSE=1 OUT=$OUT/ab timeout 330 bash bench/ab.sh ${ROUNDS:-1} epi=abtmp/epi qtma=. -- --only $CFGS > $OUT/ab_run.log 2>&1
  cd /tmp
  PYTHONPATH=/tmp/ab_qtma:/tmp/site timeout $(( 585 - ($(date +%s) - start) )) \
    python3 "$OLDPWD/bench/experiments/mla_ctx_scan.py" 2>&1 | grep -E "^(mla|fit|  )" | tee "$OUT/ctx_scan_qtma.log"
  cd - > /dev/null
fi
rm -rf "$OUT"/ab/*_[0-9]
grep -E "builds|FAILED|tests of" "$OUT/ab_run.log"
grep -E "^(==|mla)" "$OUT/ab/ab.log" | cut -c1-90
echo "total $(( $(date +%s) - start )) s"
