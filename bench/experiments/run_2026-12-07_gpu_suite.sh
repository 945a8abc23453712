#!/usr/bin/env bash
# Owed from session 59 (NOTES item 84 g), one call (carry .whl for pytest-xdist; ~270 s): the whole
# GPU suite on HEAD's build. Session 59 ran it on 87ac6c5 (902 passed, 11 skipped in 186 s at -n 12;
# call 5) and only the 151 wide-kernel cases on the store16 epilogue (c666c7d). Then, while the
# machine is warm, the trace of run_2026-12-07_sparse_trace.sh may follow as the next call.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_into /tmp/jp
timeout 480 python3 -m pytest -q -p no:cacheprovider -n 12 --durations=10 "$R/tests" > "$OUT/suite.log" 2>&1
echo "suite: rc $?"
grep -E "^(FAILED|ERROR)" "$OUT/suite.log" | head -10
tail -1 "$OUT/suite.log"
echo "total $(( $(date +%s) - start )) s"
