#!/usr/bin/env bash
# Prepared in session 54 (NOTES item 79 e), one call (carry .whl; ~300 s): where the narrow fp8 MLA
# kernel spends its time now that V^T is a register operand (item 79: a warpgroup's tile ~3,900
# cycles, O^T's two halves ~1,000 + ~900 of them, and deeper fragment pipelines and a fourth raw
# stage measured level - so is it the tensor pipe, the chain or the memory?). ncu --set full on one
# call of ours and FlashMLA's fp8 decode on mla_fp8_h16_b128_ctx4k (one profile): time, tensor-pipe
# (gmma) activity, DRAM throughput, stall ratios (tools/ncu_stalls.py); then ours alone with the
# source view (SASS rows by stall samples, tools/ncu_top_lines.py).
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
build_into /tmp/jp
ncu_kernels narrow mla_fp8_h16_b128_ctx4k "mla_fp8_narrow_kernel|splitkv_mla" --flashmla
grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|Eligible Warps" \
  "$OUT/ncu_details_narrow.txt" | cut -c1-120
ncu_source narrow mla_fp8_h16_b128_ctx4k mla_fp8_narrow_kernel
echo "total $(( $(date +%s) - start )) s"
