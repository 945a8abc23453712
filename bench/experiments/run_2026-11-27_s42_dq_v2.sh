#!/usr/bin/env bash
# Ran (session 42) on the working tree with bench/experiments/2026-11-27_ds_dequant_loader_v2.patch applied
# (`patch -p1 < ...` first); main does not carry it (NOTES item 66). Logs: bench/logs/2026-11-27_session42_dq_loader.log.
# Session 42: the dequantizing loader with the rope loaded into registers (no cp.async, so no
# wait at the tile's end: NOTES item 66 d). One package build and one trace build side by side;
# test_mla_sparse.py with DQ=1; the timeline at the sparse_h128_b64_topk2048 shape (DQ=1); then
# DQ=0 and DQ=1 per call and per layer on two configs.
#   run tool: command "bash bench/experiments/run_2026-11-27_s42_dq_v2.sh", kind nvidia-h100-x1, carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
trace_build . /tmp/trace_dq "$OUT/trace_build.log" &
build_into /tmp/jp
wait
echo "builds: $(( $(date +%s) - start )) s"
JAXPAGED_MLA_DS_DQ=1 timeout 120 python3 -m pytest -q -p no:cacheprovider -n 8 -x "$R/tests/test_mla_sparse.py" \
  "$R/tests/test_fp8.py" -k "656 or sparse" > "$OUT/tests_dq.log" 2>&1
echo "tests DQ=1: rc $? - $(tail -1 "$OUT/tests_dq.log") ($(( $(date +%s) - start )) s)"
(cd "$R" && JAXPAGED_MLA_DS_DQ=1 TRACE_LINES=14 trace_run dq2_sparse /tmp/trace_dq 128 64 4096 --cache=656 --topk=2048)
for dq in 0 1; do
  echo "== DQ=$dq" | tee -a "$OUT/ab.log"
  JAXPAGED_MLA_DS_DQ=$dq timeout 60 python3 "$R/bench/bench.py" --ours-only --ours-step --out "$OUT/dq$dq" \
    --only sparse_h128_b64_topk2048 mla_656_h128_b64_ctx4k 2>&1 | grep -E "^(mla|sparse)|Error" | tee -a "$OUT/ab.log" | cut -c1-150
done
rm -rf "$OUT"/dq0 "$OUT"/dq1
echo "total $(( $(date +%s) - start )) s"
