#!/usr/bin/env bash
# Ran (session 42) on the working tree with bench/experiments/2026-11-27_ds_dequant_loader_v1.patch applied
# (`patch -p1 < ...` first); main does not carry it (NOTES item 66). Logs: bench/logs/2026-11-27_session42_dq_loader.log.
# Session 42: the dequantizing loader (fp8_wide.cuh's kDq, JAXPAGED_MLA_DS_DQ=1; NOTES item 66).
# One build; the 656-row and sparse GPU tests with DQ=1 (stop on a failure); then DQ=0 and DQ=1
# alternating per call and per layer (--ours-only --ours-step) on the 656 configs, and one run
# with the peers (FlashMLA's time and our errors) under DQ=1.
#   run tool: command "bash bench/experiments/run_2026-11-27_s42_dq.sh", kind nvidia-h100-x1, carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
build_into /tmp/jp
T="$R/tests"
JAXPAGED_MLA_DS_DQ=1 timeout ${TEST_LIMIT:-240} python3 -m pytest -q -p no:cacheprovider -n 8 -x "$T/test_mla_sparse.py" \
  "$T/test_fp8.py" "$T/test_adversarial.py" "$T/test_decode_loop.py" -k "${TEST_K:-656 or sparse or ds}" \
  > "$OUT/tests_dq.log" 2>&1
rc=$?
echo "tests DQ=1: rc $rc - $(tail -1 "$OUT/tests_dq.log") ($(( $(date +%s) - start )) s)"
grep -E "^(FAILED|ERROR)|Error" "$OUT/tests_dq.log" | head -8
(( rc == 0 )) || exit 1
CONFIGS=${CONFIGS:-sparse_h128_b64_topk2048 sparse_h64_b64_topk2048 sparse_h16_b64_topk2048 sparse_h128_sq2_b32_topk2048 mla_656_h128_b64_ctx4k}
for r in 1 2; do
  for dq in 0 1; do
    echo "== DQ=$dq round $r" | tee -a "$OUT/ab.log"
    JAXPAGED_MLA_DS_DQ=$dq timeout 100 python3 "$R/bench/bench.py" --ours-only --ours-step --out "$OUT/dq${dq}_$r" --only $CONFIGS 2>&1 \
      | grep -E "^(mla|sparse)|Error|error" | tee -a "$OUT/ab.log" | cut -c1-160
  done
done
echo "== peers, DQ=1" | tee -a "$OUT/ab.log"
JAXPAGED_MLA_DS_DQ=1 timeout 120 python3 "$R/bench/bench.py" --out "$OUT/peers" --only sparse_h128_b64_topk2048 mla_656_h128_b64_ctx4k 2>&1 \
  | grep -E "^(mla|sparse)|Error|error|flash" | tee -a "$OUT/ab.log" | cut -c1-200
(cd "$OUT" && tar -czf dq_results.tar.gz dq0_* dq1_* peers 2>/dev/null && rm -rf dq0_* dq1_* peers)
echo "total $(( $(date +%s) - start )) s"
