#!/usr/bin/env bash
# Superseded (session 61): run_2026-12-08_combined.sh runs these patches with the others, in fewer calls.
# Prepared in session 60 (NOTES item 85 h), two calls back to back on one warm machine (carry .whl):
# the 16-bit MLA kernel's (sm90/kernel.cuh, epilogue.cuh) once-run code made compact
# (2026-12-08_mla_bf16_epilogue_compact.patch, a helper's: each row's factor and lse once, whole and
# cut sequences in separate loops, the keep mask replaced by zeroing rows without keys, the fp8
# cache's query conversion in rolled loops; a whole sequence's epilogue path 15.9 -> 8.8 KB), as
# 608c3be did for the wide fp8 kernel (-4 to -10%). Outputs must not change: wgmma_bitwise.py
# (the patched tree's) compares every output and lse word for word, and prints how many sequences
# the schedule cut, so that both epilogue branches are seen to run.
#   PART=1 (~400 s): builds base (HEAD) and ec; the bit-for-bit check; ec's MLA cases
#     (test_mla_decode, test_mla_sparse, test_fp8 -k mla).
#   PART=2 (~250 s, right after): two alternating rounds on issue 16's MLA configs.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
VARIANTS=(base=. ec=patch:$E/2026-12-08_mla_bf16_epilogue_compact.patch)
if [[ ${PART:-1} == 1 ]]; then
  AB_REUSE=1 OUT=$OUT timeout 240 bash bench/ab.sh 0 "${VARIANTS[@]}" > "$OUT/ab_build.log" 2>&1  # (base: reused if built this machine session)
  grep -E "BUILD|PATCH|builds" "$OUT/ab_build.log" | cut -c1-150 | head -4
  WB=/tmp/ab_src_ec/$E/wgmma_bitwise.py
  (cd /tmp && PYTHONPATH=/tmp/ab_base:$PYTHONPATH timeout 120 python3 -P "$WB" save /tmp/wg_base.npz &&
    PYTHONPATH=/tmp/ab_ec:$PYTHONPATH timeout 120 python3 -P "$WB" compare /tmp/wg_base.npz) > "$OUT/bitwise.log" 2>&1
  grep -E "cut\)|DIFFERS|bitwise|Error" "$OUT/bitwise.log" | sort | uniq -c | sort -rn | head -12
  AB_REUSE=1 AB_TEST="ec:tests/test_mla_decode.py tests/test_mla_sparse.py tests/test_fp8.py -k mla -n 12" \
    AB_TEST_LIMIT=$(( 570 - ($(date +%s) - start) )) OUT=$OUT timeout 575 bash bench/ab.sh 0 "${VARIANTS[@]}" \
    > "$OUT/ab_tests.log" 2>&1
  grep -E "tests of" "$OUT/ab_tests.log" | cut -c1-150
  grep -E "^(FAILED|ERROR)" "$OUT/tests_ec.log" | head -10
else
  AB_REUSE=1 OUT=$OUT timeout 580 bash bench/ab.sh 2 "${VARIANTS[@]}" -- --ours-step --only mla_h128_b64_ctx4k \
    mla_h128_b128_ctx8k mla_h64_b128_ctx4k mla_h128_b4_ctx4k mla_h16_b128_ctx4k_page64 > "$OUT/ab_run.log" 2>&1
  grep -E "^==|^mla_|FAILED|total" "$OUT/ab_run.log" | cut -c1-130 | tail -14
fi
echo "total $(( $(date +%s) - start )) s"
