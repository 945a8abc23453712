#!/usr/bin/env bash
# Session 41, one call: issue 18's sparse gather with an L2 prefetch-size hint on its cp.async
# copies (2026-11-27_sparse_l2_hint_{256,128}.patch: cp.async.cg ... .L2::256B / ::128B, as
# FlashMLA's producer loads carry), against HEAD. The session's sparse trace (NOTES item 65) put
# the gather's copy issue (~3,500 cycles a tile for thread 0's 21 copies) on the pair's critical
# path. h256's test_mla_sparse.py, 2 rounds of sparse_h128_b64 / b128 per call and per layer, then
# the timeline probe of h256 (built at low priority beside the A/B), then ncu's source view of
# HEAD's sparse kernel (stall samples by SASS line) in the time left.
#   run tool: command "bash bench/experiments/run_2026-11-27_s41_sparse_hint.sh", carry [".whl"], kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
P256=$E/2026-11-27_sparse_l2_hint_256.patch P128=$E/2026-11-27_sparse_l2_hint_128.patch
rm -rf /tmp/src_h256 && mkdir -p /tmp/src_h256 && tar --exclude=./.whl --exclude=./.git -cf - . | tar -xf - -C /tmp/src_h256
patch -d /tmp/src_h256 -p1 --quiet < "$P256" || { echo "PATCH FAILED"; exit 1; }
(nice -n 19 bash -c "source $E/trace_lib.sh; trace_build /tmp/src_h256 /tmp/trace_h256 /tmp/trace_build_h256.log; echo h256 trace build rc \$?" > /tmp/tb.rc 2>&1) &
tb=$!
AB_TEST="h256:tests/test_mla_sparse.py -n 8 -x" AB_TEST_LIMIT=120 OUT=$OUT/ab timeout 380 bash bench/ab.sh 2 \
  base=. "h256=patch:$P256" "h128=patch:$P128" -- --ours-step --only sparse_h128_b64_topk2048 sparse_h128_b128_topk2048 \
  > "$OUT/ab_run.log" 2>&1
grep -E "builds|FAILED|tests of" "$OUT/ab_run.log"
grep -E "^==|^sparse" "$OUT/ab/ab.log" | cut -c1-130
echo "timing done $(( $(date +%s) - start )) s"
wait $tb; cat /tmp/tb.rc
source $E/trace_lib.sh
TRACE_LINES=40 trace_run sparse656_h256 /tmp/trace_h256 128 64 4096 --cache=656 --topk=2048
R=$(pwd)
if (( 570 - ($(date +%s) - start) > 100 )); then
  (cd /tmp && PYTHONPATH=/tmp/ab_base:$PYTHONPATH timeout $(( 570 - ($(date +%s) - start) )) ncu --set full --import-source yes \
    -k regex:mla_ds_wide_kernel -c 1 -f -o /tmp/spsrc python3 "$R/bench/profile_one.py" sparse_h128_b64_topk2048 --calls 1 \
    > "$OUT/ncu_run.log" 2>&1) || tail -3 "$OUT/ncu_run.log"
  ncu -i /tmp/spsrc.ncu-rep --page source --csv --print-source sass > /tmp/spsrc.csv 2>/dev/null
  python3 tools/ncu_top_lines.py /tmp/spsrc.csv 80 > "$OUT/source_sparse656.txt" 2>&1
  head -30 "$OUT/source_sparse656.txt" | cut -c1-150
fi
echo "total $(( $(date +%s) - start )) s"
