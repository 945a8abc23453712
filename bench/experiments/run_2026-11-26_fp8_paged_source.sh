#!/usr/bin/env bash
# Session 31 (NOTES item 52 h): ncu's source view (SASS lines by stall samples and by instructions
# executed, tools/ncu_top_lines.py) of the paged tile kernel on fp8 decode_b64_ctx4k and
# decode_fp8_b8_ctx32k, to find where b64's 14% more instructions for the same bytes go.
#   run tool: command "bash bench/experiments/run_2026-11-26_fp8_paged_source.sh", carry [".whl"]
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
REPO=$(pwd)
export JAXPAGED_CUDA_ARCHS=90a
python3 -m pip install --no-build-isolation --no-deps . > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
cd /tmp
for cfg in decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k; do
  timeout 150 ncu --set full --import-source yes -k regex:paged_tile_kernel -c 1 -f -o "/tmp/src_$cfg" \
    python3 "$REPO/bench/profile_one.py" "$cfg" > "/tmp/src_$cfg.log" 2>&1 || tail -3 "/tmp/src_$cfg.log"
  ncu -i "/tmp/src_$cfg.ncu-rep" --page source --csv --print-source sass > "/tmp/src_$cfg.csv" 2> /tmp/src_err.log
  python3 "$REPO/tools/ncu_top_lines.py" "/tmp/src_$cfg.csv" 60 > "$OUT/source_$cfg.txt" 2>&1
  head -30 "$OUT/source_$cfg.txt"
done
