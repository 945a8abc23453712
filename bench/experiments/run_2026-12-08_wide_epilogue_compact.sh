#!/usr/bin/env bash
# Prepared in session 59 (NOTES item 84 h), two calls back to back on one warm machine (carry .whl):
#   PART=1 (~380 s): builds base (HEAD) and compact (2026-12-08_wide_epilogue_compact.patch), then
#     the WHOLE GPU suite on compact (-n 12; session 59's call 5 ran it in 186 s): this is also
#     session 59's owed suite (item 84 g) and the first GPU run of item 84 i's many-tiles tests,
#     since compact differs from HEAD only in the wide kernel's epilogue.
#   PART=2 (~350 s, right after, AB_REUSE): every wide mode's outputs compared bit for bit between
#     base and compact (wide_bitwise.py), then two alternating rounds of base and compact.
# (Traces of base and compact compare by marks 79 -> 80: the patch moves the factors' work from
# 81 -> 80 into 79 -> 81, and 81 now means "factors ready".)
# The hypothesis: the probe's epilogue took 10-20k cycles (sums met -> last store) of a
# 165-300k-cycle block, while its instructions per thread are ~1,100; it runs once a sequence
# through 34-38 KB of unrolled code (cuobjdump of fp8_wide.cu, c666c7d) that interleaves whole and
# cut sequences' stores, so instruction fetch may be what it waits on. The patch computes each
# row's factor and lse once (threads 0-63, into sMax's place) and runs whole and cut sequences in
# separate loops: a whole sequence's epilogue spans 815-928 instructions (13-15 KB) instead of
# 2,130-2,380; results bit-identical by construction. Predicted: if fetch is what the epilogue
# waits on, -2 to -4% per call dense, -4 to -8% on lists of 2048; level otherwise.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
VARIANTS=(base=. compact=patch:$E/2026-12-08_wide_epilogue_compact.patch)
if [[ ${PART:-1} == 1 ]]; then
  AB_TEST="compact:tests/ -n 12 --durations=10" AB_TEST_LIMIT=400 \
    OUT=$OUT timeout 580 bash bench/ab.sh 0 "${VARIANTS[@]}" > "$OUT/ab_build_tests.log" 2>&1
  grep -E "BUILD|PATCH|builds|tests of" "$OUT/ab_build_tests.log" | cut -c1-150 | head -6
  grep -E "^(FAILED|ERROR)" "$OUT/tests_compact.log" | head -10
else
  # (first every wide mode's outputs bit for bit, base against compact: the suite's tolerances would
  # not see a one-bit change, and the patch must change none - bench/experiments/wide_bitwise.py)
  (cd /tmp && PYTHONPATH=/tmp/ab_base:$PYTHONPATH timeout 120 python3 -P "$REPO/$E/wide_bitwise.py" save /tmp/wb_base.npz &&
    PYTHONPATH=/tmp/ab_compact:$PYTHONPATH timeout 120 python3 -P "$REPO/$E/wide_bitwise.py" compare /tmp/wb_base.npz) \
    > "$OUT/bitwise.log" 2>&1
  grep -E "DIFFERS|bitwise|Error" "$OUT/bitwise.log" | head -8
  AB_REUSE=1 OUT=$OUT timeout $(( 580 - ($(date +%s) - start) )) bash bench/ab.sh 2 "${VARIANTS[@]}" -- --ours-step --only \
    sparse_fp8math_h128_b64_topk2048 mla_fp8math_h128_b64_ctx4k mla_656fp8math_h128_b64_ctx4k > "$OUT/ab_run.log" 2>&1
  grep -E "^==|^(mla|sparse)_|FAILED|total" "$OUT/ab_run.log" | cut -c1-130 | tail -16
fi
echo "total $(( $(date +%s) - start )) s"
