#!/usr/bin/env bash
# Session 41, one call: issue 18's sparse gather with each row's 144-byte tail brought by one bulk
# copy (the copy engine) instead of 9 cp.async pieces (2026-11-27_sparse_tail_bulk.patch; NOTES
# item 65: the loader's cp.async issue, ~42 cycles an instruction an SM and unmoved by L2 hits, is
# on the pair's critical path; this cuts a warp's copies a tile from 21 to 16). Predicted 0-6% on
# sparse_h128_b64 (up to 22% of the ~3,500-cycle issue, ~780 cycles of a 12,200-cycle pair). Builds
# base and tb with tb's sanitizer driver, tb's test_mla_sparse.py, 2 rounds
# of sparse_h128_b64 / b128 per call and per layer, then memcheck of tb's MLA driver cases.
#   run tool: command "bash bench/experiments/run_2026-11-27_s41_tail_bulk.sh", carry [".whl"], kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
build_with_sanitizer tb base=. tb=patch:$E/2026-11-27_sparse_tail_bulk.patch
(cd /tmp && PYTHONPATH=/tmp/ab_tb:/tmp/site timeout 120 python3 -m pytest -q -p no:cacheprovider -n 8 -x \
  /tmp/ab_src_tb/tests/test_mla_sparse.py > "$OUT/tests_tb.log" 2>&1)
echo "tests of tb: rc $? - $(tail -1 "$OUT/tests_tb.log")"
AB_REUSE=1 OUT=$OUT/ab timeout 220 bash bench/ab.sh 2 base=. tb=patch:$E/2026-11-27_sparse_tail_bulk.patch -- \
  --ours-step --only sparse_h128_b64_topk2048 sparse_h128_b128_topk2048 > "$OUT/ab_time.log" 2>&1
grep -E "^==|^sparse" "$OUT/ab/ab.log" | cut -c1-130
echo "timing done $(( $(date +%s) - start )) s"
(( 540 - ($(date +%s) - start) > 40 )) && memcheck_mla tb
echo "total $(( $(date +%s) - start )) s"
