#!/usr/bin/env bash
# Session 46: the session-45 script's (run_2026-11-29_epilogue_and_pairs.sh) PART=2/3 on a machine
# that went cold after its PART=1, without st16 (its traces: the epilogue's stores took longer).
# Two calls on one warm machine (kind nvidia-h100-x1, carry .whl):
#   PART=1 (~560 s): base, scpairs and spec built with spec's sanitizer driver beside; one A/B round
#     of the three; memcheck of spec's MLA driver cases in the time left.
#   PART=2 (~540 s): the second round; synccheck of spec beside spec's tests (they cover scpairs'
#     code too) in the time left.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
PART=${PART:-1}
CONFIGS="sparse_f16_h128_b64_topk2048 sparse_h128_b128_topk2048 mla_fp8_h128_b64_ctx4k"
VARIANTS="base=. scpairs=patch:$E/2026-11-29_ds_scale_pairs_pf.patch spec=patch:$E/2026-11-30_wide_spec_p_on_scpairs.patch"
if [[ $PART == 1 ]]; then
  # shellcheck disable=SC2086
  build_with_sanitizer spec $VARIANTS
  ab_round 300
  memcheck_mla spec
else
  [[ -d /tmp/ab_spec/jaxpaged ]] || { echo "fresh machine: run PART=1 first"; exit 1; }
  ab_round 280
  sanitize_mla synccheck spec 560 &
  ts=/tmp/ab_src_spec/tests
  (cd /tmp && PYTHONPATH=/tmp/ab_spec:/tmp/site timeout $(( 565 - ($(date +%s) - start) )) python3 -m pytest -v \
    -p no:cacheprovider -n 8 -rf $ts/test_mla_sparse.py $ts/test_fp8.py \
    -k "sparse or mla_656 or mla_quantized_caches or mla_fp8_math or mla_row_without or mla_fp8_queries" \
    > "$OUT/tests_spec.log" 2>&1)
  echo "tests of spec: rc $? - $(tail -1 "$OUT/tests_spec.log"); passed $(grep -c PASSED "$OUT/tests_spec.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/tests_spec.log" | cut -c1-200 | head
  wait
fi
(cd "$OUT" && tar -czf /tmp/logs_part$PART.tar.gz . && rm -rf ./* && mv /tmp/logs_part$PART.tar.gz .)
echo "total $(( $(date +%s) - start )) s"
