#!/usr/bin/env bash
# Session 48 (NOTES item 73 c): HEAD (cp.async stages) on the GPU in one call (carry .whl):
#  1. build (sm_90a) into /tmp/jp; test_fp8.py's paged tests (the new keys-outside-the-range test
#     on the shipped kernel) and the GQA decode loop;
#  2. ncu --set full with source of the tile kernel of decode_fp8_b64_ctx4k, decode_fp8_b8_ctx32k
#     and (for contrast: 100% of copy bandwidth) decode_b64_ctx4k: the details page's sections
#     in $OUT/profile_details.txt, each kernel's top SASS lines and opcode shares in
#     $OUT/profile_source_CONFIG.txt (tools/ncu_top_lines.py).
#   run tool: command "bash bench/experiments/run_2026-11-28_paged_fp8_profile.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_into /tmp/jp
tests_of_build 150 "paged or gqa" test_fp8.py test_decode_loop.py
for cfg in decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k decode_b64_ctx4k; do ncu_paged "$cfg" "$cfg" source; done
grep -E "^=== |Duration|DRAM Throughput|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |Registers Per|Achieved Occupancy|Memory Throughput" \
  "$OUT/profile_details.txt" | head -60
echo "total $(( $(date +%s) - start )) s"
