#!/usr/bin/env bash
# (Ran in session 49 on 6a67027; the patch landed as d281c5f, so it no longer applies: NOTES item 74 a.)
# Session 48's prepared experiment (NOTES item 73 g), one call (carry .whl): the tile kernel's
# loader addressing each key by a 32-bit row index published once a stage
# (2026-11-29_paged_row_index.patch: the decode loop 646 -> 601 SASS instructions a warp a stage)
# against HEAD. bench/ab.sh builds both; the new tree's paged tests first (test_fp8, test_paged_attention,
# the decode loops, the adversarial paged draws: the loader serves every tile-kernel instance);
# then ROUNDS (default 3) alternating rounds on the fp8 decode configs, bf16 ones and the mixed
# prefill (every instance reads through the changed loader), per call and per layer. If it wins
# and its tests pass: apply the patch, run memcheck of the sanitizer driver's paged cases
# (bench/experiments/run_lib.sh: paged_sanitize_beside_tests), CI, RESULTS.md.
#   run tool: command "bash bench/experiments/run_2026-11-29_paged_row_index.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
AB_TEST="new:tests/test_fp8.py tests/test_paged_attention.py tests/test_decode_loop.py tests/test_adversarial.py -n 12 -x -k 'paged or fp8 or decode or loop'" \
  AB_TEST_LIMIT=200 OUT=$OUT/ab timeout 570 bash bench/ab.sh "${ROUNDS:-3}" base=. \
  new=patch:bench/experiments/2026-11-29_paged_row_index.patch -- --ours-step --only decode_fp8_b64_ctx4k \
  decode_fp8_b8_ctx32k decode_fp8_h64_b32_ctx8k decode_b64_ctx4k decode_b256_ctx1k mixed_prefill_decode \
  > "$OUT/ab_run.log" 2>&1
grep -E "builds|FAILED|tests of" "$OUT/ab_run.log"
grep -E "^==|^(decode|mixed)" "$OUT/ab/ab.log" | cut -c1-100
echo "total $(( $(date +%s) - start )) s"
