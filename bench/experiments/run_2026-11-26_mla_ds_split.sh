#!/usr/bin/env bash
# One device call (session 30, NOTES item 51): the split schedule for 656-byte rows (the wgmma
# kernel with warpgroup 0 on S + softmax + P V_L, warpgroup 1 on P V_R, the register loader
# mla_load_tiles_ds_regs): its tests with JAXPAGED_MLA_DS_WIDE=0 (every 656 case on the wgmma
# kernel), 2 rounds of the 656 configs on it, then the same build with the default (the wide
# kernel) beside FlashMLA.
#   run tool: command "bash bench/experiments/run_2026-11-26_mla_ds_split.sh", carry [".whl"]
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false JAXPAGED_CUDA_ARCHS=90a
CFGS="sparse_h128_b64_topk2048 sparse_h64_b64_topk2048 sparse_h128_sq2_b32_topk2048 sparse_h128_b128_topk2048 sparse_h16_b64_topk2048 mla_656_h128_b64_ctx4k mla_656_h16_b128_ctx4k sparse_h128_b64_topk2048_page1"
JAXPAGED_MLA_DS_WIDE=0 AB_TEST='split:tests/test_fp8.py tests/test_mla_sparse.py -n 8 -x' AB_TEST_LIMIT=${AB_TEST_LIMIT:-240} \
  OUT="$OUT" bash bench/ab.sh 2 split=. -- --only $CFGS --ours-step 2>&1 | grep -v "^builds"
echo "== the same build, default (the wide kernel), beside the peers"
REPO=$(pwd)
cd /tmp && PYTHONPATH=/tmp/ab_split:/tmp/site timeout 200 python3 "$REPO/bench/bench.py" --out "$OUT/wide" \
  --only $CFGS 2>&1 | grep -E "^(mla|sparse)" | tee "$OUT/wide.log"
