#!/usr/bin/env bash
# Session 56, call 4 (carry .whl; ~260 s): test_mla_decode and test_plan on the GPU after 0a01027
# (the dispatch and workspace of MLA calls now know fp8_math), within the session's last device time.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_into /tmp/jp
timeout 175 python3 -m pytest -q -p no:cacheprovider -n 12 "$R/tests/test_mla_decode.py" "$R/tests/test_plan.py" \
  > "$OUT/tests.log" 2>&1
echo "tests rc $?: $(tail -1 "$OUT/tests.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -12
echo "total $(( $(date +%s) - start )) s"
