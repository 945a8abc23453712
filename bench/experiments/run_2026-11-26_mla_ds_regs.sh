#!/usr/bin/env bash
# One device call (session 30, NOTES item 51): the wgmma kernel's new 656-byte loader
# (mla_load_tiles_ds_regs: the whole loader warpgroup converts, next group's bytes in registers)
# against the staging loader (base = abtmp/base, HEAD before it) and with the 200 / 104 register
# split; all with JAXPAGED_MLA_DS_WIDE=0 so the 656 configs take the wgmma kernel; then the base
# build with the default (the wide kernel) for reference. Tests of the new loader first.
#   run tool: command "bash bench/experiments/run_2026-11-26_mla_ds_regs.sh", carry ["abtmp", ".whl"]
#   (abtmp/base: mkdir -p abtmp/base && git archive 7122adc | tar -x -C abtmp/base)
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false JAXPAGED_CUDA_ARCHS=90a
CFGS="sparse_h128_b64_topk2048 sparse_h64_b64_topk2048 sparse_h128_sq2_b32_topk2048 sparse_h16_b64_topk2048 mla_656_h128_b64_ctx4k mla_656_h16_b128_ctx4k sparse_h128_b64_topk2048_page1"
JAXPAGED_MLA_DS_WIDE=0 AB_TEST='new:tests/test_fp8.py tests/test_mla_sparse.py -n 8' AB_TEST_LIMIT=${AB_TEST_LIMIT:-200} \
  OUT="$OUT" bash bench/ab.sh 2 base=abtmp/base new=. new104=patch:bench/experiments/2026-11-26_mla_ds_regs_200_104.patch -- \
  --only $CFGS --ours-step 2>&1 | grep -v "^builds"
echo "== base, default (the wide kernel on the 656 configs)"
REPO=$(pwd)
cd /tmp && PYTHONPATH=/tmp/ab_base:/tmp/site python3 "$REPO/abtmp/base/bench/bench.py" --ours-only --out "$OUT/wide" \
  --only $CFGS --ours-step 2>&1 | grep -E "^(mla|sparse)"
