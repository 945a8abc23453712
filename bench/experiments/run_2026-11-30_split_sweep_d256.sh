#!/usr/bin/env bash
# Prepared in session 52 (NOTES item 77 c), one call (carry .whl; ~200 s), meant for the first
# session lent an H100 (it runs on an H200 too): the split count swept (default 1 2 3 4) on the
# fp8 decode configs whose one-wave grid leaves SM slots empty, on HEAD's decode-transposed (DTR)
# instance, plus bf16 D = 256 as a control. On the H200 (session 51) fp8 D = 256 ran 0.279 ms at
# 3 splits against 0.328 unsplit (-15%), while on the H100 (item 39 d, before DTR) fp8 h64's same
# 256-of-396 geometry lost 7% at 3 splits. Item 77 c's model says why: a DTR D = 256 block streams
# about 12.8 GB/s alone, so 2 blocks an SM give ~25 GB/s, about the H100's whole share per SM
# (3.35 TB/s / 132) but two thirds of the H200's (4.9 TB/s / 132). Predicted on the H100: D = 256
# unsplit at >= 95% of copy bandwidth and 3 splits slower; if so, a split rule keyed on the
# device's bandwidth per SM (cudaDevAttrMemoryClockRate x bus width) against the instance's
# block rate is worth building; if 3 splits gain on the H100 too, a plain fill rule (two nearly
# full waves) serves both. One build of HEAD with the split-count switch (2026-11-29_paged_kv_
# splits_env.patch: no effect unset).
#   run tool: command "bash bench/experiments/run_2026-11-30_split_sweep_d256.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_patched /tmp/jp 2026-11-29_paged_kv_splits_env.patch
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv | tee "$OUT/gpu.txt"
CFGS=${CFGS:-"decode_fp8_d256_softcap_b32_ctx8k decode_fp8_h64_b32_ctx8k decode_fp8_b64_ctx4k decode_d256_softcap_b32_ctx8k"}
# shellcheck disable=SC2086
split_sweep 80 "${SPLITS:-default 1 2 3 4}" $CFGS
echo "total $(( $(date +%s) - start )) s"
