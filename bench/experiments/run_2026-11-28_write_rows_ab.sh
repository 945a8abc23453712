#!/usr/bin/env bash
# Prepared in session 37, not run: write_kv's write_rows kernel at 79.5-79.7% of copy bandwidth on
# 16K bf16 tokens at random slots (issue 17's target 80%; NOTES item 58 b). Two variants against
# HEAD, each one change:
#   ef: the new rows read with no L1 line and an L2 evict-first policy (read once; L2 keeps the
#       written cache lines instead) - 2026-11-28_write_rows_evict_first.patch;
#   d8: 16 lanes a 2 KiB unit, 8 16-byte reads in flight a lane (half the warps, the same bytes in
#       flight) - 2026-11-28_write_rows_depth8.patch.
# serving_ops' 16K-token cases (bf16 4 / 16 GiB, fp8, pages), 2 rounds, variants alternating.
# Best after run_2026-11-28_sanitize_and_write_ncu.sh's ncu profile says where the time goes.
#   run tool: command "bash bench/experiments/run_2026-11-28_write_rows_ab.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 base=. ef=patch:$E/2026-11-28_write_rows_evict_first.patch \
  d8=patch:$E/2026-11-28_write_rows_depth8.patch > "$OUT/ab_build.log" 2>&1
grep -E "builds|FAILED" "$OUT/ab_build.log"
repo=$(pwd)
for r in 1 2; do
  for v in base ef d8; do
    echo "== $v round $r"
    (cd /tmp && PYTHONPATH=/tmp/ab_$v:/tmp/site timeout 100 python3 "$repo/bench/serving_ops.py" \
      --variants write_kv --tokens 16384 --no-sinks 2>&1 | grep -E "tokens|Error")
  done
done 2>&1 | tee "$OUT/write_ab.log"
(cd /tmp && PYTHONPATH=/tmp/ab_d8:/tmp/site timeout 120 python3 -m pytest -q -p no:cacheprovider -n 8 \
  /tmp/ab_src_d8/tests/test_cache_write.py > "$OUT/tests_d8.log" 2>&1; echo "tests of d8: rc $? - $(tail -1 "$OUT/tests_d8.log")")
(cd /tmp && PYTHONPATH=/tmp/ab_ef:/tmp/site timeout 120 python3 -m pytest -q -p no:cacheprovider -n 8 \
  /tmp/ab_src_ef/tests/test_cache_write.py > "$OUT/tests_ef.log" 2>&1; echo "tests of ef: rc $? - $(tail -1 "$OUT/tests_ef.log")")
echo "total $(( $(date +%s) - start )) s"
