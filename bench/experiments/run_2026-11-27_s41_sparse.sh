#!/usr/bin/env bash
# Session 41, one call: issue 18's sparse 656 decode - (1) the L2 prefetch of tile u + 2's rows
# (2026-11-30_sparse_l2_prefetch.patch, NOTES item 62; rebased on the gather ring's timeline marks)
# against HEAD: pf's test_mla_sparse.py, then 2 rounds of the four FlashMLA-compared sparse configs
# per call and per layer (bench/ab.sh); (2) the timeline probe of the sparse gather (new: tools/
# mla_trace.cu --cache=656 --topk=2048, the gather ring's marks 90-95) on HEAD and on pf, and of
# the dense 656-byte path on HEAD (--cache=656: the TMA ring), both probes built at low priority
# beside the A/B's builds. No memcheck here (the landing call does it if pf wins).
#   run tool: command "bash bench/experiments/run_2026-11-27_s41_sparse.sh", carry [".whl"], kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
P=$E/2026-11-30_sparse_l2_prefetch.patch
rm -rf /tmp/src_pf && mkdir -p /tmp/src_pf && tar --exclude=./.whl --exclude=./.git -cf - . | tar -xf - -C /tmp/src_pf
patch -d /tmp/src_pf -p1 --quiet < "$P" || { echo "PATCH FAILED"; exit 1; }
(nice -n 19 bash -c "source $E/trace_lib.sh; trace_build . /tmp/trace_base /tmp/trace_build_base.log; echo base rc \$?" > /tmp/tb_base.rc 2>&1) &
t1=$!
(nice -n 19 bash -c "source $E/trace_lib.sh; trace_build /tmp/src_pf /tmp/trace_pf /tmp/trace_build_pf.log; echo pf rc \$?" > /tmp/tb_pf.rc 2>&1) &
t2=$!
sparse_ab_timing pf "$P" 400
wait $t1 $t2; cat /tmp/tb_base.rc /tmp/tb_pf.rc
trace_run sparse656_base /tmp/trace_base 128 64 4096 --cache=656 --topk=2048
trace_run sparse656_pf /tmp/trace_pf 128 64 4096 --cache=656 --topk=2048
(( 560 - ($(date +%s) - start) > 30 )) && trace_run dense656_base /tmp/trace_base 128 64 4096 --cache=656
cp /tmp/trace_build_base.log /tmp/trace_build_pf.log "$OUT/ab/" 2>/dev/null
echo "total $(( $(date +%s) - start )) s"
