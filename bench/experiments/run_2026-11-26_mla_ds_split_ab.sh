#!/usr/bin/env bash
# One device call (session 30, NOTES item 51): the split schedule's loader variants - base (one
# refill's loads ahead), pf (+ the next pair's rows prefetched into L2), la2 (two refills' loads
# ahead, budgets 216 / 160 / 128) - one round on four 656 configs with JAXPAGED_MLA_DS_WIDE=0,
# then ncu of the base's kernel on sparse_h128_b64_topk2048.
#   run tool: command "bash bench/experiments/run_2026-11-26_mla_ds_split_ab.sh", carry [".whl"]
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false JAXPAGED_CUDA_ARCHS=90a JAXPAGED_MLA_DS_WIDE=0
OUT="$OUT" bash bench/ab.sh 1 base=. pf=patch:bench/experiments/2026-11-26_mla_ds_split_l2_prefetch.patch \
  la2=patch:bench/experiments/2026-11-26_mla_ds_split_lookahead2.patch -- \
  --only sparse_h128_b64_topk2048 sparse_h64_b64_topk2048 mla_656_h128_b64_ctx4k sparse_h16_b64_topk2048 --ours-step 2>&1 | grep -v "^builds"
PROFILE_CONFIG=sparse_h128_b64_topk2048 PROFILE_KERNELS="mla_wgmma" PROFILE_COUNT=1 PROFILE_ARGS="--calls 1" \
  PROFILE_SOURCE_KERNELS="mla_wgmma_kernel" timeout 200 bash bench/device_run.sh profile 2>&1 | tail -8
# (only a few files come back: keep the logs that matter)
rm -rf "$OUT"/build_*.log "$OUT"/*_1 "$OUT"/profile.ncu-rep "$OUT"/profile_raw.csv "$OUT"/build.log
ls "$OUT"
