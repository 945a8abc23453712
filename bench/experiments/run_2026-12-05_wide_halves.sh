#!/usr/bin/env bash
# Prepared in session 57 (NOTES item 82 l), two calls on one warm machine (carry .whl):
#   PART=1 (~550 s: ~200 s of builds, then up to 340 s of 148 tests - narrow -k if they are
#     cut): builds base (HEAD), halves (2026-12-04_wide_halves.patch), eparallel
#     (2026-12-04_kdf_eparallel.patch) and both; the wide kernel's tests on halves+eparallel
#     (test_fp8's MLA cases, test_mla_sparse's 656-byte cases: the barrier array moved for sparse
#     lists too).
#   PART=2 (~400 s, right after, AB_REUSE): two alternating timing rounds of the four on kDF, kF8
#     and the float16 reading at h128 b64 4K (every wide-kernel mode takes the halves).
# halves: two full barriers a raw buffer (latent blocks 0-1 + the 656-byte tails, then the rest),
# so that S^T starts on the first half: the traces show warpgroup 1 waiting for its tile at every
# pair's start (median 737 cycles in kDF, 338-422 in kF8, 150 in the f16 reading) because the
# next pair's second tile can only be loaded once the pair's first buffer is free.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
VARIANTS=(base=. halves=patch:$E/2026-12-04_wide_halves.patch eparallel=patch:$E/2026-12-04_kdf_eparallel.patch
          both=patch:$E/2026-12-04_wide_halves.patch+$E/2026-12-04_kdf_eparallel.patch)
if [[ ${PART:-1} == 1 ]]; then
  AB_TEST="both:tests/test_fp8.py tests/test_mla_sparse.py -n 12 -k 'mla'" AB_TEST_LIMIT=340 \
  OUT=$OUT timeout 590 bash bench/ab.sh 0 "${VARIANTS[@]}" > "$OUT/ab_build_tests.log" 2>&1
  grep -E "^tests|^FAILED|^ERROR|BUILD|PATCH|builds" "$OUT/ab_build_tests.log" | cut -c1-150 | head -14
else
  AB_REUSE=1 OUT=$OUT timeout 580 bash bench/ab.sh 2 "${VARIANTS[@]}" -- --ours-step --only \
    mla_656fp8math_h128_b64_ctx4k mla_fp8math_h128_b64_ctx4k mla_656f16_h128_b64_ctx4k > "$OUT/ab_run.log" 2>&1
  grep -E "^==|mla_|FAILED|total" "$OUT/ab_run.log" | cut -c1-130 | tail -28
fi
echo "total $(( $(date +%s) - start )) s"
