#!/usr/bin/env bash
# Superseded (session 61): run_2026-12-08_combined.sh runs these patches with the others, in fewer calls.
# Prepared in session 60 (NOTES item 85 e-g), two calls back to back on one warm machine (carry .whl):
# the wide fp8 kernel's per-sequence query section (Q^T), which the traces put at 11-13k cycles a
# block against ~1-2k of load latency. Two hypotheses, one variant each, both bit-identical to HEAD:
#   qc (2026-12-08_wide_q_compact.patch): the kF8 branch's code made small (instruction fetch of
#      once-run code, as the epilogue's was: 608c3be gained 4-10% so);
#   a2 (2026-12-07_wide_q_first_a2.patch): the loader issues its third tile only once the queries'
#      loads are back (the kernel-start burst: 128 blocks' queries racing their rings' tiles).
#   PART=1 (~300 s): builds base (HEAD), qc and a2 (~150 s); every wide mode's outputs bit for
#     bit, base against each (wide_bitwise.py of the qc tree, which covers special query values).
#   PART=2 (~300 s, right after, AB_REUSE): the wide-kernel cases on qc (~75 s), then two
#     alternating rounds of base, qc and a2 on three wide configs; then
#     `run_2026-12-07_fixed_cost_trace.sh` (TRACE_VARIANTS="qc a2") as a third call shows marks
#     61 -> 62 (queries ready) of each.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
VARIANTS=(base=. qc=patch:$E/2026-12-08_wide_q_compact.patch a2=patch:$E/2026-12-07_wide_q_first_a2.patch)
if [[ ${PART:-1} == 1 ]]; then
  AB_REUSE=1 OUT=$OUT timeout 300 bash bench/ab.sh 0 "${VARIANTS[@]}" > "$OUT/ab_build.log" 2>&1
  grep -E "BUILD|PATCH|builds" "$OUT/ab_build.log" | cut -c1-150 | head -6
  WB=/tmp/ab_src_qc/$E/wide_bitwise.py
  (cd /tmp && PYTHONPATH=/tmp/ab_base:$PYTHONPATH timeout 120 python3 -P "$WB" save /tmp/wb_base.npz &&
    for v in qc a2; do echo "== $v"; PYTHONPATH=/tmp/ab_$v:$PYTHONPATH timeout 120 python3 -P "$WB" compare /tmp/wb_base.npz; done) \
    > "$OUT/bitwise.log" 2>&1
  grep -E "^==|DIFFERS|bitwise|Error" "$OUT/bitwise.log" | head -10
else
  AB_REUSE=1 AB_TEST="qc:tests/test_fp8.py tests/test_mla_sparse.py -k mla -n 12" AB_TEST_LIMIT=150 \
    OUT=$OUT timeout 200 bash bench/ab.sh 0 "${VARIANTS[@]}" > "$OUT/ab_tests.log" 2>&1
  grep -E "BUILD|tests of" "$OUT/ab_tests.log" | cut -c1-150 | head -4
  grep -E "^(FAILED|ERROR)" "$OUT/tests_qc.log" | head -10
  AB_REUSE=1 OUT=$OUT timeout $(( 585 - ($(date +%s) - start) )) bash bench/ab.sh 2 "${VARIANTS[@]}" -- --ours-step --only \
    sparse_fp8math_h128_b64_topk2048 mla_fp8math_h128_b64_ctx4k mla_656fp8math_h128_b64_ctx4k > "$OUT/ab_run.log" 2>&1
  grep -E "^==|^(mla|sparse)_|FAILED|total" "$OUT/ab_run.log" | cut -c1-130 | tail -20
fi
echo "total $(( $(date +%s) - start )) s"
