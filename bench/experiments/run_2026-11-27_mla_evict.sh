#!/usr/bin/env bash
# For the next session (NOTES item 53 h; built and compiled here, not run): one call, carry .whl and
# abtmp (abtmp/base = HEAD: `mkdir -p abtmp/base && git archive HEAD | tar -x -C abtmp/base`).
# The MLA tile loads with an L2 eviction policy - ef = EVICT_FIRST (FlashMLA's),
# el = EVICT_LAST (2026-11-26_mla_tma_evict_{first,last}.patch) - against HEAD:
#   1. the timeline probe of ef and el (the pair period: 6860-7000 cycles at HEAD);
#   2. ncu's memory tables of HEAD's kernel beside FlashMLA's on mla_h128_b64_ctx4k (where its bytes
#      come from: L2 hit rates, L2 -> SM bytes and throughput);
#   3. ROUNDS (2) of per call on the h128 configs and h64.
# Four files come back: trace_ef.txt, trace_el.txt, ncu_mem.txt, ab.log.
#   run tool: command "bash bench/experiments/run_2026-11-27_mla_evict.sh", carry [".whl", "abtmp"]
set -uo pipefail
source bench/experiments/run_lib.sh
REPO=$(pwd)
source $E/trace_lib.sh
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
OUT=/tmp/about bash bench/ab.sh 0 base=abtmp/base ef=patch:$E/2026-11-26_mla_tma_evict_first.patch \
  el=patch:$E/2026-11-26_mla_tma_evict_last.patch > /tmp/ab_build.log 2>&1
tail -2 /tmp/ab_build.log
trace_variants /tmp ef el
echo "builds and traces: $(( $(date +%s) - start )) s"
cd /tmp
M=lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_bytes.sum
M=$M,dram__bytes_read.sum,l1tex__m_xbar2l1tex_read_bytes.sum,sm__cycles_elapsed.avg,lts__throughput.avg.pct_of_peak_sustained_elapsed
XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH=/tmp/ab_base:/tmp/site timeout 200 ncu --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --metrics "$M" \
  -k "regex:mla_wgmma|splitkv_mla" -c 2 python3 "$REPO/bench/profile_one.py" mla_h128_b64_ctx4k --plan --flashmla \
  --calls 1 > "$OUT/ncu_mem.txt" 2>&1
grep -E "^  [a-z].*\(|lts__t_sectors_srcunit_tex_op_read|xbar2l1tex|dram__bytes_read|Duration" "$OUT/ncu_mem.txt" | cut -c1-120
cd "$REPO"
CFGS=${CFGS:-"mla_h128_b64_ctx4k mla_h128_b128_ctx8k mla_h128_sq2_causal_b64_ctx4k mla_h64_b128_ctx4k"}
OUT=/tmp/about AB_REUSE=1 bash bench/ab.sh ${ROUNDS:-2} base=abtmp/base ef=. el=. -- --only $CFGS > /tmp/ab_run.log 2>&1
cp /tmp/about/ab.log "$OUT/ab.log"
grep -E "^(==|mla)" "$OUT/ab.log"
echo "total: $(( $(date +%s) - start )) s"
