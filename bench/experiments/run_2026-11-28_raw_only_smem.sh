#!/usr/bin/env bash
# Session 50, one call (carry .whl; fits ~400 s): 2026-11-28_paged_raw_only_smem.patch - pure fp8
# decode with GQA <= 8 at head dims 64 and 256 runs every tile transposed on the raw stages, so the
# launch drops the converted buffer's shared memory (D = 64: 61 -> 45 KiB a block, 3 -> 4 blocks an
# SM, registers allowing 4; D = 256: 105 -> 73 KiB, 2 -> 3); ncu of both (this session) showed
# latency-bound kernels (0.5-0.7 eligible warps a scheduler, 12-18% occupancy). Against HEAD: 2
# alternating rounds of the D = 64 and 256 fp8 configs and the D = 128 one (unchanged: control);
# then the new tree's fp8 paged tests beside memcheck of its paged driver cases (two new ones for
# this launch). Land it if they pass and the two gain.
#   run tool: command "bash bench/experiments/run_2026-11-28_raw_only_smem.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
LIMIT=${LIMIT:-385}
patch_ab 2026-11-28_paged_raw_only_smem.patch "${ROUNDS:-2}" 120 decode_fp8_d64_h64_b64_ctx4k decode_fp8_d256_softcap_b32_ctx8k decode_fp8_b64_ctx4k
left=$(( LIMIT - ($(date +%s) - start) ))
(cd /tmp && timeout $left compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/san_new/jaxpaged_sanitize \
  --paged-only > "$OUT/sanitize_memcheck.log" 2>&1) &
(cd /tmp && PYTHONPATH=/tmp/ab_new:/tmp/site timeout $left python3 -m pytest -q -p no:cacheprovider -n 8 \
  /tmp/ab_src_new/tests/test_fp8.py -k "paged" > "$OUT/tests_new.log" 2>&1)
echo "tests of new: rc $? - $(tail -1 "$OUT/tests_new.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests_new.log" | head -8
wait
echo "memcheck: $(grep -E "ERROR SUMMARY" "$OUT/sanitize_memcheck.log" | tail -1) | $(grep -c ' ok' "$OUT/sanitize_memcheck.log") ok lines | $(tail -1 "$OUT/sanitize_memcheck.log")"
grep -E "d64|d256" "$OUT/sanitize_memcheck.log" | cut -c1-110
echo "total $(( $(date +%s) - start )) s"
