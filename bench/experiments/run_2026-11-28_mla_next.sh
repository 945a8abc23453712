#!/usr/bin/env bash
# Prepared in session 34 for the next (NOTES item 55, "What the next session should start from"),
# not yet run: one call on a fresh machine, logs straight into $OUT (a call cut off at its limit
# still returns them).
#   1. which instance runs at 16 query rows (mla_h16_b128_ctx4k_page64): the TMA one
#      (mla_wgmma_kernel<..., true, false, 0>) unless the driver refused the q maps' 64-row box
#      over 16 rows (then the gathering kernel, <..., false, false, 0>);
#   2. block 0's life on HEAD (trace marks 50-54: queries landed, first / last pair, epilogue),
#      mla_h128_b64_ctx4k from DRAM, against session 33's (item 54 i);
#   3. the context scan (per layer, B=64) of HEAD and of 2026-11-28_mla_tma_store.patch (a block's
#      last whole sequence staged in the query buffer and written by TMA stores; compiled, 96 bytes
#      of ptxas spills against HEAD's 16), FlashMLA beside each.
#   run tool: command "bash bench/experiments/run_2026-11-28_mla_next.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
source $E/trace_lib.sh
trace_build . /tmp/trace_head "$OUT/trace_build.log" &
OUT=$OUT/ab bash bench/ab.sh 0 head=. store=patch:$E/2026-11-28_mla_tma_store.patch > "$OUT/ab_build.log" 2>&1
wait
grep -E "builds|FAILED" "$OUT/ab_build.log"
R=$(pwd)
cd /tmp
PYTHONPATH=/tmp/ab_head:/tmp/site timeout 120 python3 "$R/tools/call_timeline.py" mla_h16_b128_ctx4k_page64 --plan \
  > "$OUT/timeline_h16.txt" 2>&1
grep -E "mla_wgmma|mla_fp8|^==" "$OUT/timeline_h16.txt" | cut -c1-120
cd "$R"
trace_report /tmp/trace_head /tmp/tr_head.bin "$OUT/trace_seq_head.txt" 128 64 4096
grep -E "^block|WG0 from" "$OUT/trace_seq_head.txt" | head -4
for v in head store; do
  CTX_SCAN_LIMIT=$(( 590 - ($(date +%s) - start) )) ctx_scan $v
done
echo "total $(( $(date +%s) - start )) s"
