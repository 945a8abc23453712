#!/usr/bin/env bash
# Session 35: the cross-layer dependent launch, per call and per layer (bench.py --ours-step), on
# MLA and paged configs: head, xl (2026-11-28_mla_xlayer_pdl.patch: MLA only) and both (+ the
# paged tile kernel always a dependent launch and the split merge letting the next kernel launch
# at its start: 2026-11-28_xlayer_pdl_both.patch). The paged tests on `both` first.
#   run tool: command "bash bench/experiments/run_2026-11-28_xlayer_ab.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
CFGS=${CFGS:-"mla_h128_b4_ctx4k mla_h128_b1_ctx32k mla_h128_b64_ctx4k mla_fp8_h16_b128_ctx4k decode_b16_ctx2k decode_b1_ctx8k decode_b64_ctx4k decode_fp8_b64_ctx4k"}
AB_TEST="both:tests/test_paged_attention.py tests/test_plan.py tests/test_decode_loop.py tests/test_sinks.py -n 8 -x" \
  AB_TEST_LIMIT=${AB_TEST_LIMIT:-200} OUT=$OUT/ab timeout $(( 585 - ($(date +%s) - start) )) \
  bash bench/ab.sh ${ROUNDS:-1} head=. xl=patch:$E/2026-11-28_mla_xlayer_pdl.patch \
  both=patch:$E/2026-11-28_xlayer_pdl_both.patch -- --only $CFGS --ours-step > $OUT/ab_run.log 2>&1
rm -rf "$OUT"/ab/*_[0-9]
grep -E "builds|FAILED|tests of" "$OUT/ab_run.log"
grep -E "^(==|mla|decode)" "$OUT/ab/ab.log" | cut -c1-100
echo "total $(( $(date +%s) - start )) s"
