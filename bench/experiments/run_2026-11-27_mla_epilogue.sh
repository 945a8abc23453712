#!/usr/bin/env bash
# NOTES item 55: the MLA Hopper kernel's epilogue in 16-byte stores (epilogue.cuh: a quad's lanes
# exchange values so each warp store covers 64 contiguous bytes of a row) against HEAD
# (abtmp/base), and with it the uniform-length batches cut into balanced pieces instead of whole
# sequences (2026-11-27_mla_cut_uniform.patch). Two calls on one warm machine:
#   run tool: command "bash bench/experiments/run_2026-11-27_mla_epilogue.sh", carry [".whl", "abtmp"]
#     (builds the three variants, the epilogue variant's MLA tests on the GPU, one A/B round)
#   then at once: command "PHASE=2 bash bench/experiments/run_2026-11-27_mla_epilogue.sh", same carry
#     (two more A/B rounds on the same builds, then the context-length scan, ours beside FlashMLA)
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
CFGS=${CFGS:-"mla_h128_b64_ctx4k mla_h128_b128_ctx8k mla_h128_b4_ctx4k mla_h128_varlen_b128"}
VARIANTS=(base=abtmp/base epi=. cut=patch:$E/2026-11-27_mla_cut_uniform.patch)
if [[ ${PHASE:-1} == 1 ]]; then
  AB_TEST="epi:tests/test_mla_decode.py tests/test_mla_sparse.py -n 8 -x" AB_TEST_LIMIT=${AB_TEST_LIMIT:-220} \
    OUT=/tmp/about bash bench/ab.sh ${ROUNDS:-1} "${VARIANTS[@]}" -- --only $CFGS > /tmp/ab_run.log 2>&1
  cp /tmp/about/ab.log "$OUT/ab1.log"
  cp /tmp/about/tests_epi.log "$OUT/tests_epi.log" 2>/dev/null
  grep -E "builds|FAILED|tests of" /tmp/ab_run.log
  grep -E "^(==|mla)" "$OUT/ab1.log" | cut -c1-100
else
  AB_REUSE=1 OUT=/tmp/about2 bash bench/ab.sh ${ROUNDS:-2} "${VARIANTS[@]}" -- --only $CFGS > /tmp/ab_run2.log 2>&1
  cp /tmp/about2/ab.log "$OUT/ab2.log"
  grep -E "^(==|mla)" "$OUT/ab2.log" | cut -c1-100
  cd /tmp
  for v in ${SCAN:-epi}; do
    echo "== ctx scan, $v"
    PYTHONPATH=/tmp/ab_$v:/tmp/site timeout $(( 590 - ($(date +%s) - start) )) \
      python3 "$OLDPWD/bench/experiments/mla_ctx_scan.py" 2>&1 | grep -vE "^(W|I)[0-9]{4}|Warning|warn" | tee "$OUT/ctx_scan_$v.log"
  done
fi
echo "total $(( $(date +%s) - start )) s"
