#!/usr/bin/env bash
# Session 51, one call (carry .whl; ~480 s): choose_kv_splits' one-wave rule lets a pure-decode
# grid that fills every SM and fits one wave take as many splits as keep it in that one wave
# (2026-11-28_split_one_wave_fill.patch). From run_2026-11-28_split_rule_sweep.sh: only fp8
# h64_b32_ctx8k (256 blocks, 528 resident) changes among the bench's configs (1 -> 2 splits,
# swept 0.147 -> 0.139 ms); the others are more than half full. 2 alternating rounds of it and
# three controls, then the paged tests of the new tree beside memcheck and racecheck.
#   run tool: command "bash bench/experiments/run_2026-11-28_split_one_wave_fill.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
patch_ab 2026-11-28_split_one_wave_fill.patch "${ROUNDS:-2}" 120 \
  decode_fp8_h64_b32_ctx8k decode_fp8_d64_h64_b64_ctx4k decode_fp8_b64_ctx4k decode_h64_b32_ctx8k
paged_sanitize_beside_tests new "not mla" 8 test_fp8.py test_paged_attention.py
echo "total $(( $(date +%s) - start )) s"
