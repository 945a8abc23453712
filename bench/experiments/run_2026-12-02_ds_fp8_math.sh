#!/usr/bin/env bash
# Session 56, call 2 (carry .whl; ~500 s): the 656-byte rows' fp8-math mode (fp8_wide.cuh's kDF,
# NOTES item 81). Build (sm_90a); the fp8-math and 656-byte tests and the write path's quotient
# tests on the GPU; bench: the new configs beside mla_fp8math (FlashMLA's dense fp8 decode) and
# the float16 reading; memcheck of the new tests' small cases.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_into /tmp/jp
timeout 260 python3 -m pytest -q -p no:cacheprovider -n 8 "$R/tests/test_fp8.py" "$R/tests/test_cache_write.py" \
  -k "fp8_math or 656 or quotient or ds_rows" > "$OUT/tests.log" 2>&1
echo "tests rc $?: $(tail -1 "$OUT/tests.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -12
timeout 170 python3 "$R/bench/bench.py" --ours-step --out "$OUT/bench" --only mla_fp8math_h128_b64_ctx4k \
  mla_656fp8math_h128_b64_ctx4k mla_656f16_h128_b64_ctx4k mla_656fp8math_h16_b128_ctx4k mla_656f16_h16_b128_ctx4k \
  mla_656fp8math_h128_b128_ctx8k > "$OUT/bench.log" 2>&1
echo "bench rc $?"
grep -E "^mla" "$OUT/bench.log" | cut -c1-150
timeout 120 compute-sanitizer --tool memcheck --print-limit 20 python3 -m pytest -q -p no:cacheprovider -p no:xdist \
  "$R/tests/test_fp8.py" -k "scales_across_tokens and 16" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY|passed|failed' "$OUT/memcheck.log" | tail -2 | tr '\n' ' ')"
echo "total $(( $(date +%s) - start )) s"
