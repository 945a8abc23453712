#!/usr/bin/env bash
# Owed from session 58 (NOTES item 83 c), one call (carry .whl for pytest-xdist): the wide fp8 MLA
# kernel's 148 cases (test_fp8 + test_mla_sparse, -k mla) on HEAD's build in full - calls 3-4 of
# session 58 ran 89 and 44 of them on b1d11c0 before their limits. Build ~80 s, tests ~330-400 s
# with -n 12 (session 58's call 1: 144 in ~326 s after four builds).
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_into /tmp/jp
TESTS_N=12 tests_of_build 480 "mla" test_fp8.py test_mla_sparse.py
grep -c " PASSED" "$OUT/tests.log"
echo "total $(( $(date +%s) - start )) s"
