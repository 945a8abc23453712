#!/usr/bin/env bash
# Session 36: the write_rows kernel rewritten (a lane group per unit, the slot read once, four
# 16-byte reads in flight a lane; K and V in one launch) and made write_kv's default. One call: build (sm_90a) into
# /tmp/jw, the write tests and the decode loop on the GPU, memcheck of the write tests, then
# bench/serving_ops.py: the default (rows) beside the XLA scatter, 16K tokens bf16 / fp8.
#   run tool: command "bash bench/experiments/run_2026-11-27_write_rows.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_into /tmp/jw
timeout 200 python3 -m pytest -q -n 4 "$R/tests/test_cache_write.py" "$R/tests/test_decode_loop.py" \
  > "$OUT/tests.log" 2>&1
echo "tests rc $?: $(tail -1 "$OUT/tests.log")"
JAXPAGED_WRITE_IMPL=rows timeout 200 compute-sanitizer --tool memcheck --print-limit 20 \
  python3 -m pytest -q -p no:xdist "$R/tests/test_cache_write.py" -k "rows and (matches or duplicate or mla or vmap)" \
  > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY|passed|failed' "$OUT/memcheck.log" | tail -2 | tr '\n' ' ')"
timeout 330 python3 "$R/bench/serving_ops.py" --out "$OUT" \
  --variants write_kv write_kv_unique scatter_unique > "$OUT/serving.log" 2>&1
echo "serving rc $?"
grep -E "tokens|sinks" "$OUT/serving.log" | cut -c1-130
echo "total $(( $(date +%s) - start )) s"
