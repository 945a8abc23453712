#!/usr/bin/env bash
# Session 32 (NOTES item 53), one call (carry .whl): the TMA loader's L2 prefetch of the pair after
# the next (JAXPAGED_MLA_L2_PREFETCH, default on): the timeline probe with it off and on, the MLA
# GPU tests with it on, then 2 rounds of per call + per layer, off / on alternating.
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
REPO=$(pwd)
# (the prefetch was not kept: it is bench/experiments/2026-11-26_mla_l2_prefetch.patch now)
patch -p1 --quiet < bench/experiments/2026-11-26_mla_l2_prefetch.patch || { echo "PATCH FAILED"; exit 1; }
export JAXPAGED_CUDA_ARCHS=90a PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
source bench/experiments/trace_lib.sh
trace_build . /tmp/trace "$OUT/trace_build.log" &
python3 -m pip install --no-build-isolation --no-deps . > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
wait
for v in 0 1; do
  JAXPAGED_MLA_L2_PREFETCH=$v trace_report /tmp/trace /tmp/tr_$v.bin "$OUT/trace_pf$v.txt"
  head -1 "$OUT/trace_pf$v.txt"
done
cd /tmp
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
timeout 240 python3 -m pytest -q -x -n 8 "$REPO/tests/test_mla_decode.py" "$REPO/tests/test_plan.py" > "$OUT/tests.log" 2>&1
tail -2 "$OUT/tests.log"
CFGS=${CFGS:-"mla_h128_b64_ctx4k mla_h128_b128_ctx8k mla_h64_b128_ctx4k mla_h16_b128_ctx4k_page64 mla_h128_b4_ctx4k mla_h128_sq2_causal_b64_ctx4k"}
for r in 1 2; do
  for v in 0 1; do
    echo "== JAXPAGED_MLA_L2_PREFETCH=$v round $r" | tee -a "$OUT/ab.log"
    JAXPAGED_MLA_L2_PREFETCH=$v timeout 200 python3 "$REPO/bench/bench.py" --ours-only --ours-step --out "/tmp/pf_${v}_$r" \
      --only $CFGS 2>&1 | grep -E "^mla" | tee -a "$OUT/ab.log"
  done
done
