#!/usr/bin/env bash
# Prepared in session 58 (NOTES item 83 f), two calls on one warm machine (carry .whl):
#   PART=1 (~560 s): builds base (HEAD) and four (2026-12-06_kf8_four_stages.patch), then the wide
#     kernel's 148 cases (test_fp8 + test_mla_sparse, -k mla) on four - they cover HEAD's kDF code
#     as well (the patch leaves every mode but kF8 as it is): this is also session 58's owed suite
#     (item 83 c); -n 12 under 400 s.
#   PART=2 (~200 s, right after, AB_REUSE): two alternating rounds of base and four on the kF8
#     configs (and kDF's h128 b64 as a control: its code is unchanged).
# four: kF8's shared memory holds five Q^T blocks (its e4m3 queries; it reserved the float16 path's
# nine) and one P^T block (it reserved two), so four raw buffers fit (213.9 KiB: regions after P^T keep their offsets): the loader runs a
# whole pair ahead and warpgroup 1's wait for its tile at a pair's start (median 338-422 cycles of
# kF8's 5,583, session 57's traces) should vanish. Predicted: kF8 -4 to -7% per call.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
VARIANTS=(base=. four=patch:$E/2026-12-06_kf8_four_stages.patch)
if [[ ${PART:-1} == 1 ]]; then
  AB_TEST="four:tests/test_fp8.py tests/test_mla_sparse.py -n 12 -vv --durations=25 -k mla" AB_TEST_LIMIT=400 \
  OUT=$OUT timeout 590 bash bench/ab.sh 0 "${VARIANTS[@]}" > "$OUT/ab_build_tests.log" 2>&1
  grep -E "BUILD|PATCH|builds" "$OUT/ab_build_tests.log" | cut -c1-150 | head -6
  echo "passed: $(grep -c ' PASSED' "$OUT/tests_four.log")  failed: $(grep -c ' FAILED' "$OUT/tests_four.log")"
  grep -E " FAILED|^FAILED|^ERROR" "$OUT/tests_four.log" | head -8
  tail -1 "$OUT/tests_four.log"
else
  AB_REUSE=1 OUT=$OUT timeout 580 bash bench/ab.sh 2 "${VARIANTS[@]}" -- --ours-step --only \
    mla_fp8math_h128_b64_ctx4k mla_fp8math_h128_b128_ctx8k mla_656fp8math_h128_b64_ctx4k > "$OUT/ab_run.log" 2>&1
  grep -E "^==|mla_|FAILED|total" "$OUT/ab_run.log" | cut -c1-130 | tail -16
fi
echo "total $(( $(date +%s) - start )) s"
