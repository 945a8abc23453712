#!/usr/bin/env bash
# Prepared in session 54 (NOTES item 79 e), one call (carry .whl; ~300 s): where the narrow fp8 MLA
# kernel spends its time now that V^T is a register operand (item 79: a warpgroup's tile ~3,900
# cycles, O^T's two halves ~1,000 + ~900 of them, and deeper fragment pipelines and a fourth raw
# stage measured level - so is it the tensor pipe, the chain or the memory?). ncu --set full on one
# call of ours and FlashMLA's fp8 decode on mla_fp8_h16_b128_ctx4k (one profile): time, tensor-pipe
# (gmma) activity, DRAM throughput, stall ratios (tools/ncu_stalls.py); then ours alone with the
# source view (SASS rows by stall samples, tools/ncu_top_lines.py).
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
build_into /tmp/jp
cfg=mla_fp8_h16_b128_ctx4k
timeout 200 ncu --set full -k "regex:mla_fp8_narrow_kernel|splitkv_mla" -c 2 -f -o /tmp/nrncu \
  python3 "$R/bench/profile_one.py" $cfg --calls 1 --flashmla > "$OUT/ncu_run.log" 2>&1
echo "ncu rc $? ($(( $(date +%s) - start )) s)"; tail -3 "$OUT/ncu_run.log"
ncu -i /tmp/nrncu.ncu-rep --page details > "$OUT/ncu_details.txt" 2>&1
ncu -i /tmp/nrncu.ncu-rep --page raw --csv > /tmp/raw.csv 2>&1
python3 "$R/tools/ncu_stalls.py" /tmp/raw.csv > "$OUT/ncu_stalls.txt"
cut -c1-120 "$OUT/ncu_stalls.txt"
timeout 150 ncu --set full --import-source yes -k regex:mla_fp8_narrow_kernel -c 1 -f -o /tmp/nrsrc \
  python3 "$R/bench/profile_one.py" $cfg --calls 1 > "$OUT/src_run.log" 2>&1 || tail -3 "$OUT/src_run.log"
ncu -i /tmp/nrsrc.ncu-rep --page source --csv --print-source sass > /tmp/nrsrc.csv 2> /tmp/src_err.log
python3 "$R/tools/ncu_top_lines.py" /tmp/nrsrc.csv 80 > "$OUT/source_narrow.txt" 2>&1
head -40 "$OUT/source_narrow.txt" | cut -c1-160
echo "total $(( $(date +%s) - start )) s"
