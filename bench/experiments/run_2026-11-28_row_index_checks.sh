#!/usr/bin/env bash
# Session 49: checks of the landed row index (NOTES item 73 g / 74 a) on HEAD: the package and
# the sanitizer driver built; memcheck and racecheck (--quick) of the driver's paged cases in the
# background beside pytest -n 8 of every test file that reaches the paged tile kernel.
#   run tool: command "bash bench/experiments/run_2026-11-28_row_index_checks.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
build_with_sanitizer new new=patch:  # (patch: with none = a copy of the tree, which the driver build and the tests need)
paged_sanitize_beside_tests new "not mla" 8 test_fp8.py test_paged_attention.py test_plan.py test_decode_loop.py \
  test_adversarial.py
echo "total $(( $(date +%s) - start )) s"
