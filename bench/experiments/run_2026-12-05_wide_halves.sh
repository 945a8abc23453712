#!/usr/bin/env bash
# Prepared in session 57 (NOTES item 82 l), two calls on one warm machine (carry .whl):
#   PART=1 (~550 s: ~200 s of builds, then up to 340 s of 148 tests - narrow -k if they are
#     cut): builds base (HEAD), halves (2026-12-04_wide_halves.patch), eparallel
#     (2026-12-04_kdf_eparallel.patch) and both; the wide kernel's tests on halves+eparallel
#     (test_fp8's MLA cases, test_mla_sparse's 656-byte cases: the barrier array moved for sparse
#     lists too).
#   PART=2 (~400 s, right after, AB_REUSE): two alternating timing rounds of the four on kDF, kF8
#     and the float16 reading at h128 b64 4K (every wide-kernel mode takes the halves).
#   PART=3 (~250 s, optional): the probe's timelines of base and halves (kDF, kF8): does
#     warpgroup 1's wait at the pair's start (mark 64) shrink?
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
if [[ ${PART:-1} == 3 ]]; then  # (~250 s, after PART=1 on the same warm machine: the trees exist)
  source bench/experiments/trace_lib.sh
  for v in base halves; do trace_build /tmp/ab_src_$v /tmp/trace_$v "$OUT/trace_build_$v.log" & done
  wait
  for v in base halves; do
    for c in 656fp8math fp8math; do
      TRACE_LINES=20 trace_run ${v}_$c /tmp/trace_$v 128 64 4096 --cache=$c | grep -E "pair period| 6[3-7] " | cut -c1-120
    done
  done
elif [[ ${PART:-1} == 1 ]]; then
  AB_TEST="both:tests/test_fp8.py tests/test_mla_sparse.py -n 12 -k 'mla'" AB_TEST_LIMIT=340 \
  OUT=$OUT timeout 590 bash bench/ab.sh 0 "${VARIANTS[@]}" > "$OUT/ab_build_tests.log" 2>&1
  grep -E "^tests|^FAILED|^ERROR|BUILD|PATCH|builds" "$OUT/ab_build_tests.log" | cut -c1-150 | head -14
else
  AB_REUSE=1 OUT=$OUT timeout 580 bash bench/ab.sh 2 "${VARIANTS[@]}" -- --ours-step --only \
    mla_656fp8math_h128_b64_ctx4k mla_fp8math_h128_b64_ctx4k mla_656f16_h128_b64_ctx4k > "$OUT/ab_run.log" 2>&1
  grep -E "^==|mla_|FAILED|total" "$OUT/ab_run.log" | cut -c1-130 | tail -28
fi
echo "total $(( $(date +%s) - start )) s"
