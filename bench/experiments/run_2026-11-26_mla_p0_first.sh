#!/usr/bin/env bash
# Session 32 (NOTES item 53), one call (carry .whl and abtmp): the seesaw with P0 handed over
# against m0 and warpgroup 1's O_R += P0 V0_R first (buffer 0 freed ~1400 cycles earlier in the
# model), refills in tile order. Builds HEAD (abtmp/base) and the tree, the tree's timeline probe,
# ROUNDS (1) of per call + per layer A/B, then the tree's MLA tests in what time is left.
# It ran on 6921697 with bench/experiments/2026-11-26_mla_p0_first.patch applied (the change was
# not kept; the patch applies to 6921697, not on top of the trace marks that landed after it).
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
REPO=$(pwd)
start=$(date +%s)
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
export XLA_PYTHON_CLIENT_PREALLOCATE=false
source bench/experiments/trace_lib.sh
trace_build . /tmp/trace "$OUT/trace_build.log" &
bash bench/ab.sh 0 base=abtmp/base new=. > "$OUT/ab_build.log" 2>&1
wait
echo "builds: $(( $(date +%s) - start )) s"
trace_report /tmp/trace /tmp/tr.bin "$OUT/trace_new.txt"
head -1 "$OUT/trace_new.txt"
CFGS=${CFGS:-"mla_h128_b64_ctx4k mla_h128_b128_ctx8k mla_h64_b128_ctx4k mla_h16_b128_ctx4k_page64 mla_h128_b4_ctx4k mla_h128_sq2_causal_b64_ctx4k"}
AB_REUSE=1 bash bench/ab.sh ${ROUNDS:-1} base=abtmp/base new=. -- --only $CFGS --ours-step > "$OUT/ab_run.log" 2>&1
grep -E "^(==|mla)" "$OUT/ab.log"
left=$(( ${CALL_LIMIT:-590} - ($(date +%s) - start) ))
cd /tmp
PYTHONPATH=/tmp/ab_new:/tmp/site timeout $left python3 -m pytest -q -x -n 8 -p no:cacheprovider "$REPO/tests/test_mla_decode.py" \
  "$REPO/tests/test_plan.py" > "$OUT/tests_new.log" 2>&1
echo "tests (limit $left s): rc $? - $(tail -1 "$OUT/tests_new.log")"
