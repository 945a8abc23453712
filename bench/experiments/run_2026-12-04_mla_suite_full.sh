#!/usr/bin/env bash
# Session 57, call 1 (carry .whl; ~480 s): test_mla_decode and test_plan in full on the GPU after
# 0a01027 (session 56's call 4 ran 64 of 113 before its time ran out).
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_into /tmp/jp
timeout $(( 585 - ($(date +%s) - start) )) python3 -m pytest -q -p no:cacheprovider -n 14 --durations=8 \
  "$R/tests/test_mla_decode.py" "$R/tests/test_plan.py" > "$OUT/tests.log" 2>&1
echo "tests rc $?: $(tail -1 "$OUT/tests.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -12
grep -A10 "slowest" "$OUT/tests.log" | cut -c1-120
echo "total $(( $(date +%s) - start )) s"
