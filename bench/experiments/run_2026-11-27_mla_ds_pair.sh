#!/usr/bin/env bash
# One device call for the next session (NOTES item 51 i; built, not run): the split schedule in
# 2-block clusters (bench/experiments/2026-11-26_mla_ds_pair_clusters.patch: the two row blocks of
# a partition share each tile's conversion, st.async into the peer) - its tests and synccheck /
# memcheck with JAXPAGED_MLA_DS_WIDE=0 (every 656 case on the wgmma kernel; the pair kernel takes
# those with two row blocks: 128 rows), then 2 rounds of pair vs JAXPAGED_MLA_DS_PAIR=0 (the
# landed split kernel) on the 656 configs, and the wide kernel (default) beside FlashMLA.
#   run tool: command "bash bench/experiments/run_2026-11-27_mla_ds_pair.sh", carry [".whl"]
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
REPO=$(pwd)
patch -p1 --quiet < bench/experiments/2026-11-26_mla_ds_pair_clusters.patch || { echo "PATCH FAILED"; exit 1; }
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
export JAXPAGED_CUDA_ARCHS=90a
JAXPAGED_MLA_DS_WIDE=0 SANITIZE_TOOLS="synccheck memcheck" SANITIZE_ARGS=--mla-only SANITIZE_LIMIT=240 \
  TEST_FILES="tests/test_fp8.py tests/test_mla_sparse.py" TEST_LIMIT=200 \
  bash bench/device_run.sh test,sanitize -n 8 -k "mla or 656 or ds or sparse" 2>&1 | grep -E "passed|failed|rc |FAIL" | tail -6
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
CFGS="sparse_h128_b64_topk2048 sparse_h128_b128_topk2048 sparse_h128_b64_topk2048_page1 mla_656_h128_b64_ctx4k"  # (128 rows: two row blocks)
cd /tmp
for r in 1 2; do
  for v in pair split; do
    echo "== $v round $r"
    env JAXPAGED_MLA_DS_WIDE=0 JAXPAGED_MLA_DS_PAIR=$([[ $v == pair ]] && echo 1 || echo 0) \
      timeout 120 python3 "$REPO/bench/bench.py" --ours-only --out "$OUT/${v}_$r" --only $CFGS --ours-step 2>&1 | grep -E "^(mla|sparse)"
  done
done
echo "== the wide kernel (default), FlashMLA beside"
timeout 150 python3 "$REPO/bench/bench.py" --out "$OUT/wide" --only $CFGS 2>&1 | grep -E "^(mla|sparse)"
rm -rf "$OUT"/build.log "$OUT"/sanitize_build.log "$OUT"/main_job.log "$OUT"/*_1 "$OUT"/*_2 "$OUT"/wide
