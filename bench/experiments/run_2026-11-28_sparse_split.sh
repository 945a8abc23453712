#!/usr/bin/env bash
# Session 44 (NOTES item 69 c): on top of the sparse rows by bulk copies (HEAD), two loader
# experiments, one call (kind nvidia-h100-x1, carry .whl):
#   split: O^T reads tokens 0-31 of every column block first, and each half of a tile is handed back
#          as soon as its values are in registers (rows 0-31 after the 4th of 8 k-steps, rows 32-63
#          after the last, before the products finish); the gather waits per half;
#   both:  split + each row by one bulk copy of 656 bytes (the even thread; the odd one arrives only).
# Builds base / split / both, test_mla_sparse.py on split and both, then 2 rounds of two sparse configs.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
OUT=$OUT/ab timeout 330 bash bench/ab.sh 0 base=. split=patch:$E/2026-11-28_sparse_split.patch \
  both=patch:$E/2026-11-28_sparse_row1_split.patch > "$OUT/ab_build.log" 2>&1
grep -E "builds|FAILED" "$OUT/ab_build.log"
for v in split both; do
  (cd /tmp && PYTHONPATH=/tmp/ab_$v:/tmp/site timeout 120 python3 -m pytest -q -p no:cacheprovider -n 4 -rf \
    /tmp/ab_src_$v/tests/test_mla_sparse.py > "$OUT/tests_$v.log" 2>&1; echo "tests of $v: rc $? - $(tail -1 "$OUT/tests_$v.log")") &
done
wait
grep -hE "^(FAILED|ERROR)" "$OUT"/tests_*.log | cut -c1-200 | head
AB_REUSE=1 OUT=$OUT/ab timeout $(( 585 - ($(date +%s) - start) )) bash bench/ab.sh 2 base=. \
  split=patch:$E/2026-11-28_sparse_split.patch both=patch:$E/2026-11-28_sparse_row1_split.patch -- --ours-step \
  --only sparse_f16_h128_b64_topk2048 sparse_h128_b128_topk2048 > "$OUT/ab_run.log" 2>&1
grep -E "^==|^sparse" "$OUT/ab/ab.log" | cut -c1-110
echo "total $(( $(date +%s) - start )) s"
