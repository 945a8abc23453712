#!/usr/bin/env bash
# Prepared in session 42, not run: the dequantizing loader v1 with the integer decode in its
# conversion (2026-11-28_ds_dequant_loader_v3.patch = v1 + ds_dq_chunk's decode; NOTES items 66,
# 67). One call (name kind nvidia-h100-x1, carry .whl): v3 built into /tmp/ab_v3 beside its timeline
# probe; its 656 / sparse tests with JAXPAGED_MLA_DS_DQ=1 (stop on a failure); the timeline at the
# sparse_h128_b64_topk2048 shape; DQ=0 and DQ=1 per call and per layer on two configs.
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
rm -rf /tmp/src_v3 && mkdir -p /tmp/src_v3 && tar --exclude=./.whl --exclude=./.git -cf - . | tar -xf - -C /tmp/src_v3
patch -d /tmp/src_v3 -p1 --quiet < $E/2026-11-28_ds_dequant_loader_v3.patch || { echo "PATCH FAILED"; exit 1; }
trace_build /tmp/src_v3 /tmp/trace_v3 "$OUT/trace_build.log" &
(cd /tmp/src_v3 && JAXPAGED_CUDA_ARCHS=90a timeout 300 python3 -m pip install --no-build-isolation --no-deps \
  --target /tmp/ab_v3 . > "$OUT/build.log" 2>&1) || { tail -20 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
wait
echo "builds: $(( $(date +%s) - start )) s"
T=/tmp/src_v3/tests
(cd /tmp && JAXPAGED_MLA_DS_DQ=1 PYTHONPATH=/tmp/ab_v3:$PYTHONPATH timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 -x \
  "$T/test_mla_sparse.py" "$T/test_fp8.py" -k "656 or sparse" > "$OUT/tests_v3.log" 2>&1)
rc=$?
echo "tests DQ=1: rc $rc - $(tail -1 "$OUT/tests_v3.log") ($(( $(date +%s) - start )) s)"
(( rc == 0 )) || exit 1
JAXPAGED_MLA_DS_DQ=1 TRACE_LINES=14 trace_run v3_sparse /tmp/trace_v3 128 64 4096 --cache=656 --topk=2048
for dq in 0 1; do
  echo "== DQ=$dq" | tee -a "$OUT/ab.log"
  (cd /tmp && JAXPAGED_MLA_DS_DQ=$dq PYTHONPATH=/tmp/ab_v3:$PYTHONPATH timeout 60 python3 /tmp/src_v3/bench/bench.py --ours-only \
    --ours-step --out "$OUT/dq$dq" --only sparse_h128_b64_topk2048 mla_656_h128_b64_ctx4k 2>&1) \
    | grep -E "^(mla|sparse)|Error" | tee -a "$OUT/ab.log" | cut -c1-150
done
rm -rf "$OUT"/dq0 "$OUT"/dq1
echo "total $(( $(date +%s) - start )) s"
