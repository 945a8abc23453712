#!/usr/bin/env bash
# Session 58 (NOTES item 83), one call (carry .whl and abtmp: abtmp/base = `git archive` of
# 042e5ef): base vs the working tree (the commit after 042e5ef: session 57's e-parallel
# patch, the wide-halves patch restricted to kDF - run_2026-12-05_wide_halves.sh measured it
# costing kF8 1-2% -, and one power-of-two helper for kDF's 2^E). The wide kernel's tests on the
# new tree first (-n 16, up to 300 s), then two alternating timing rounds on kDF and kF8.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
AB_TEST="new:tests/test_fp8.py tests/test_mla_sparse.py -n 16 -k 'mla'" AB_TEST_LIMIT=300 \
OUT=$OUT timeout 585 bash bench/ab.sh 2 base=abtmp/base new=. -- --ours-step --only \
  mla_656fp8math_h128_b64_ctx4k mla_fp8math_h128_b64_ctx4k > "$OUT/ab_run.log" 2>&1
grep -E "^==|mla_|FAILED|ERROR|passed|failed|builds" "$OUT/ab_run.log" | cut -c1-130 | tail -16
tail -3 "$OUT/tests_new.log"
echo "total $(( $(date +%s) - start )) s"
