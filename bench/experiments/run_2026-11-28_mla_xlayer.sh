#!/usr/bin/env bash
# Session 35: where a layer's time goes between kernels inside a 32-layer step (call_timeline.py
# --step: ours with the plan made once, FlashMLA's CUDA graph of 32 calls), and the cross-layer
# dependent launch (2026-11-28_mla_xlayer_pdl.patch: with a plan the attention kernel is a
# dependent launch too, and the merge lets the next kernel launch at its start - so the next
# layer's attention blocks are resident and past their launch when this layer's grids finish).
# Then the context scan of both builds, and the variant's tests.
#   run tool: command "bash bench/experiments/run_2026-11-28_mla_xlayer.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 head=. xl=patch:$E/2026-11-28_mla_xlayer_pdl.patch > "$OUT/ab_build.log" 2>&1
grep -E "builds|FAILED" "$OUT/ab_build.log"
R=$(pwd)
cd /tmp
for v in head xl; do
  fm=$([[ $v == head ]] && echo --flashmla)
  PYTHONPATH=/tmp/ab_$v:/tmp/site timeout 150 python3 "$R/tools/call_timeline.py" mla_h128_b64_ctx4k \
    mla_h128_b4_ctx4k --step --calls 12 $fm > "$OUT/step_timeline_$v.txt" 2>&1
  grep -vE "Warning|warn_once" "$OUT/step_timeline_$v.txt" | cut -c1-130
done
cd "$R"
ctx_scan head xl
variant_tests xl test_plan.py test_decode_loop.py test_mla_decode.py
echo "total $(( $(date +%s) - start )) s"
