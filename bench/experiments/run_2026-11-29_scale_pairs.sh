#!/usr/bin/env bash
# Prepared in session 44 (NOTES item 69 g), not run. One call (kind nvidia-h100-x1, carry .whl):
# 656-byte rows' O^T scale factors as pairs written once a tile (`2026-11-29_ds_scale_pairs.patch`:
# S::kSc, wide_scale_pair_at; one 16-byte load a k-step for the float16 reading where each took
# four loads and two conversions, two for the bf16 reading where each took four loads).
# Builds base (HEAD) and scpairs; scpairs' 656 / float16 / sparse tests; 2 rounds of dense and
# sparse 656 configs in both readings (per call and per layer).
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 base=. scpairs=patch:$E/2026-11-29_ds_scale_pairs.patch > "$OUT/ab_build.log" 2>&1
grep -E "builds|FAILED" "$OUT/ab_build.log"
TS=/tmp/ab_src_scpairs/tests
(cd /tmp && PYTHONPATH=/tmp/ab_scpairs:/tmp/site timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 -rf \
  $TS/test_mla_sparse.py $TS/test_fp8.py -k "sparse or 656 or f16_ or nan_bytes" > "$OUT/tests_scpairs.log" 2>&1)
echo "tests of scpairs: rc $? - $(tail -1 "$OUT/tests_scpairs.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests_scpairs.log" | cut -c1-200 | head
AB_REUSE=1 OUT=$OUT/ab timeout $(( 585 - ($(date +%s) - start) )) bash bench/ab.sh 2 base=. \
  scpairs=patch:$E/2026-11-29_ds_scale_pairs.patch -- --ours-step --only mla_656f16_h128_b64_ctx4k \
  mla_656_h128_b64_ctx4k sparse_f16_h128_b64_topk2048 sparse_h128_b128_topk2048 > "$OUT/ab_run.log" 2>&1
grep -E "^==|^(mla|sparse)" "$OUT/ab/ab.log" | cut -c1-110
echo "total $(( $(date +%s) - start )) s"
