#!/usr/bin/env bash
# One device call (session 29, NOTES item 50 a): why the staggered wide kernel (order A) measured
# slower than the lockstep one. Builds main and main + the staggered patch (bench/ab.sh 0), then
# ncu --set full of one wide-kernel call of each on mla_fp8_h128_b64_ctx4k and the 656-byte sparse
# sparse_h128_b64_topk2048, with the details page and the top SASS lines by stall samples.
#   run tool: command "bash bench/experiments/profile_2026-11-26_staggered.sh", carry [".whl"]
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
REPO=$(pwd)
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false JAXPAGED_CUDA_ARCHS=90a
OUT="$OUT" bash bench/ab.sh 0 base=. st=patch:bench/experiments/2026-11-26_mla_wide_staggered.patch
cd /tmp
for v in base st; do
  for pair in mla_fp8_h128_b64_ctx4k:mla_fp8_wide sparse_h128_b64_topk2048:mla_ds_wide; do
    cfg=${pair%%:*} k=${pair#*:} tag=${v}_${pair#*:}
    PYTHONPATH=/tmp/ab_$v:/tmp/site timeout 200 ncu --set full --import-source yes -k "regex:$k" -c 1 -f \
      -o "/tmp/prof_$tag" python3 "$REPO/bench/profile_one.py" "$cfg" --plan > "/tmp/prof_run_$tag.log" 2>&1 ||
      { echo "ncu $tag failed"; tail -5 "/tmp/prof_run_$tag.log"; continue; }
    ncu -i "/tmp/prof_$tag.ncu-rep" --page details > "$OUT/prof_details_$tag.txt" 2>&1
    ncu -i "/tmp/prof_$tag.ncu-rep" --page source --csv --print-source sass -k "regex:$k" -c 1 > "/tmp/src_$tag.csv" 2>/dev/null &&
      python3 "$REPO/tools/ncu_top_lines.py" "/tmp/src_$tag.csv" 50 > "$OUT/prof_source_$tag.txt" 2>&1
    echo "$tag: $(grep -E "^    Duration|Registers Per Thread" "$OUT/prof_details_$tag.txt" | tr -s ' ' | tr '\n' ';')"
  done
done
