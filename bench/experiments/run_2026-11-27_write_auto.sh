#!/usr/bin/env bash
# Session 36, after run_2026-11-27_write_rows.sh: write_kv's "auto" choice (the write_rows kernel
# for >= 1 MiB a cache, else the scatter) on the GPU - the write tests, the decode loop, the plan
# and workspace tests and the main job (every op through the GPU lowering that session 36 changed),
# then serving_ops' crossover: the default, the kernel forced and the scatter at 64 - 16K tokens.
#   run tool: command "bash bench/experiments/run_2026-11-27_write_auto.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_into /tmp/jw
timeout 200 python3 -m pytest -q -n 8 "$R/tests/test_cache_write.py" "$R/tests/test_decode_loop.py" \
  "$R/tests/test_plan.py" "$R/tests/test_workspace.py" > "$OUT/tests.log" 2>&1
echo "tests rc $?: $(tail -1 "$OUT/tests.log")"
timeout 120 python3 -P -m jaxpaged --small > "$OUT/main_job.log" 2>&1
echo "main job rc $?: $(tail -2 "$OUT/main_job.log" | tr '\n' ' ')"
timeout 240 python3 "$R/bench/serving_ops.py" --out "$OUT" \
  --variants write_kv rows_unique scatter_unique > "$OUT/serving.log" 2>&1
echo "serving rc $?"
grep -E "tokens|sinks" "$OUT/serving.log" | cut -c1-120
echo "total $(( $(date +%s) - start )) s"
