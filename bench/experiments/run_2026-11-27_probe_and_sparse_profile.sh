#!/usr/bin/env bash
# One device call for the next session's first step (NOTES item 50 i-j, session 29's list (0)):
# tools/ds_producer_probe.cu (FlashMLA's division of work for 656-byte rows: a producer warpgroup
# dequantizing each gathered tile once per 2-block cluster; its cycles per tile and a bit-exact
# check), then ncu --set full of sparse_h128_b64_topk2048, ours (the wide kernel) and FlashMLA's
# sparse decode on the same inputs (bench/profile_one.py handles sparse configs since session 29),
# with the top SASS lines of both attention kernels. About 3-4 minutes with the package build.
#   run tool: command "bash bench/experiments/run_2026-11-27_probe_and_sparse_profile.sh", carry [".whl"]
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I src -o /tmp/ds_producer_probe \
  tools/ds_producer_probe.cu > "$OUT/probe_build.log" 2>&1 && timeout 120 /tmp/ds_producer_probe 2>&1 | tee "$OUT/probe.log"
# (one call each: ours, mla_ds_wide_kernel, then FlashMLA's, flash_fwd_splitkv_mla_fp8_sparse_kernel in
# its source tree - the wheel's legacy build may name it slightly differently: the regex is loose)
PROFILE_CONFIG=sparse_h128_b64_topk2048 PROFILE_KERNELS="ds_wide|fp8_sparse" PROFILE_COUNT=2 PROFILE_ARGS="--calls 1" \
  PROFILE_SOURCE_KERNELS="mla_ds_wide_kernel fp8_sparse" JAXPAGED_CUDA_ARCHS=90a \
  bash bench/device_run.sh profile 2>&1 | tail -30
