#!/usr/bin/env bash
# Prepared in session 40 (NOTES item 63 g), not run: the wide kernel's register split for its TMA
# instances (2026-12-01_wide_regs_240_24.patch): the loader warpgroup (one thread issues the TMA
# copies) shrinks to 24 registers and the compute warpgroups grow to 240 (was 40 / 232; the sparse
# gather keeps 40 / 232). ptxas: the four per-tensor fp8 instances (f16 path and kF8) go from 12-24
# bytes of spill to none; the dense 656-byte one from 20 to 12. ncu (item 63 f) counted only 12,976
# local requests in a kF8 call (about 12 a compute warp), so predicted 0-2%: worth one call only
# beside another experiment, or for the spill-free build itself.
# One call: base and regs built with regs's sanitizer driver; regs's fp8_math tests (the kF8 instance; the f16 path's
# wide-kernel tests are in test_fp8's other MLA cases: run them when landing); 2 rounds of
# three wide-kernel configs per call and per layer; memcheck of regs's MLA driver cases.
#   run tool: command "bash bench/experiments/run_2026-12-01_wide_regs.sh", carry [".whl"], kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
build_with_sanitizer regs base=. regs=patch:$E/2026-12-01_wide_regs_240_24.patch
variant_tests_limit=100
(cd /tmp && PYTHONPATH=/tmp/ab_regs:/tmp/site timeout $variant_tests_limit python3 -m pytest -q -p no:cacheprovider \
  -n 8 -x /tmp/ab_src_regs/tests/test_fp8.py -k "fp8_math" > "$OUT/tests_regs.log" 2>&1)
echo "tests of regs: rc $? - $(tail -1 "$OUT/tests_regs.log")"
AB_REUSE=1 OUT=$OUT/ab timeout 260 bash bench/ab.sh 2 base=. regs=patch:$E/2026-12-01_wide_regs_240_24.patch -- \
  --ours-step --only mla_fp8_h128_b64_ctx4k mla_fp8math_h128_b128_ctx8k mla_656_h128_b64_ctx4k > "$OUT/ab_time.log" 2>&1
grep -E "^==|^mla" "$OUT/ab/ab.log" | cut -c1-150
echo "timing done $(( $(date +%s) - start )) s"
(( 585 - ($(date +%s) - start) > 60 )) && memcheck_mla regs
echo "total $(( $(date +%s) - start )) s"
