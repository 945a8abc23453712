#!/usr/bin/env bash
# Session 57, call 4 (carry .whl; ~500 s): kDF's P^T phase. The session's trace (call 2) put most of
# kDF's extra time per pair against kF8 between the vote barrier and P^T stored (~3,190 cycles
# against ~1,160; S^T ~900 more): per pair and thread 8 ldexpf (~17 instructions each) and 64
# float32 -> e4m3 conversions where kF8 has 16. factor = 2026-12-04_kdf_factor.patch (2^-E_g one
# float while E_g is a normal exponent); f16pack = that + 2026-12-04_kdf_f16pack.patch (P x 2^-8 x
# factor in f16, the e4m3 bytes from the f16 bits: 20 conversions a pair instead of 64). Tests of
# f16pack first (the 656 fp8_math tests, the new negative/NaN scales test), then the A/B.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
AB_TEST="f16pack:tests/test_fp8.py -n 8 -k 'fp8_math and 656 or scales_across or negative_and_nan'" AB_TEST_LIMIT=220 \
OUT=$OUT timeout 560 bash bench/ab.sh 2 base=. factor=patch:$E/2026-12-04_kdf_factor.patch \
  f16pack=patch:$E/2026-12-04_kdf_f16pack.patch -- \
  --ours-step --only mla_656fp8math_h128_b64_ctx4k mla_656fp8math_h16_b128_ctx4k > "$OUT/ab_run.log" 2>&1
grep -E "^==|^tests|^FAILED|mla_656|BUILD|PATCH|total" "$OUT/ab_run.log" | cut -c1-130 | tail -24
echo "total $(( $(date +%s) - start )) s"
