#!/usr/bin/env bash
# Session 41, one call: HEAD built for sm_90a into /tmp/jp (kept for the full bench's calls that
# follow on the same machine), the kF8 source view by stall samples (run_2026-11-27_fp8math_ncu.sh
# SOURCE=1) while the timeline probe builds beside it, the probe's traces (run_2026-12-01_wide_trace.sh),
# then the GPU tests of test_fp8.py on HEAD (the vmap + plan + sinks fp8_math case and session 40's
# tidyings have not run on a GPU). Logs but the summaries go into $OUT/diag_logs.tar.gz.
#   run tool: command "bash bench/experiments/run_2026-11-27_s41_diag.sh", carry [".whl"], kind nvidia-h100-x1
set -uo pipefail
REPO0=$(pwd)
export OUT=${OUT:-/tmp/jaxpaged-out}
(trace_start=$(date +%s); source bench/experiments/trace_lib.sh
 trace_build . /tmp/trace /tmp/trace_build.log; echo "trace build rc $? in $(( $(date +%s) - trace_start )) s" > /tmp/trace_build.rc) &
tpid=$!
SOURCE=1 bash bench/experiments/run_2026-11-27_fp8math_ncu.sh
wait $tpid; cat /tmp/trace_build.rc
cd "$REPO0"
s0=$(date +%s)
source bench/experiments/trace_lib.sh
for cache in fp8math fp8; do
  TRACE_LIMIT=90 TRACE_LINES=60 trace_run $cache /tmp/trace 128 64 4096 --cache=$cache
done
echo "traces: $(( $(date +%s) - s0 )) s"
source bench/experiments/run_lib.sh
use_peers
(cd /tmp && PYTHONPATH=/tmp/jp:/tmp/site timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 \
  "$REPO0/tests/test_fp8.py" > "$OUT/tests_fp8.log" 2>&1)
echo "test_fp8 on HEAD: rc $? - $(tail -1 "$OUT/tests_fp8.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests_fp8.log" | head
cd "$OUT" && cp /tmp/trace_build.log . 2>/dev/null
tar -czf diag_logs.tar.gz build.log ncu_run.log src_run.log ncu_details.txt trace_build.log 2>/dev/null \
  && rm -f build.log ncu_run.log src_run.log ncu_details.txt trace_build.log
ls "$OUT"
