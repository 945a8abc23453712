#!/usr/bin/env bash
# Session 40 (NOTES item 63 f): where the wide fp8 kernel's fp8-math mode spends its time beside
# FlashMLA's fp8 decode on the same inputs (mla_fp8math_h128_b64_ctx4k: ours 0.113 ms, FlashMLA
# 0.115, predicted 0.095-0.105): ncu --set full on one call of each kernel (one profile), the
# details page and the warp-stall ratios of the raw page exported as text.
# Run in session 40 (bench/logs/2026-11-27_h100_session40_fp8math_ncu.txt).
#   run tool: command "SOURCE=1 bash bench/experiments/run_2026-11-27_fp8math_ncu.sh", carry [".whl"], kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
build_into /tmp/jp
cfg=mla_fp8math_h128_b64_ctx4k
timeout 200 ncu --set full -k "regex:mla_fp8_wide_kernel|splitkv_mla" -c 2 -f -o /tmp/f8ncu \
  python3 "$R/bench/profile_one.py" $cfg --calls 1 --flashmla > "$OUT/ncu_run.log" 2>&1
echo "ncu rc $? ($(( $(date +%s) - start )) s)"; tail -3 "$OUT/ncu_run.log"
ncu -i /tmp/f8ncu.ncu-rep --page details > "$OUT/ncu_details.txt" 2>&1
ncu -i /tmp/f8ncu.ncu-rep --page raw --csv > /tmp/raw.csv 2>&1
python3 "$R/tools/ncu_stalls.py" /tmp/raw.csv > "$OUT/ncu_stalls.txt"  # (its inline Python until session 54)
cat "$OUT/ncu_stalls.txt" | cut -c1-120
grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued|Eligible Warps" \
  "$OUT/ncu_details.txt" | cut -c1-120
# SOURCE=1 (prepared in session 40 after the first run, not yet run): ncu's source view of ours
# alone (SASS rows by stall samples, tools/ncu_top_lines.py): which instructions the long- and
# short-scoreboard and wait stalls sit on (item 63 f).
if [[ ${SOURCE:-0} == 1 ]]; then
  timeout 150 ncu --set full --import-source yes -k regex:mla_fp8_wide_kernel -c 1 -f -o /tmp/f8src \
    python3 "$R/bench/profile_one.py" $cfg --calls 1 > "$OUT/src_run.log" 2>&1 || tail -3 "$OUT/src_run.log"
  ncu -i /tmp/f8src.ncu-rep --page source --csv --print-source sass > /tmp/f8src.csv 2> /tmp/src_err.log
  python3 "$R/tools/ncu_top_lines.py" /tmp/f8src.csv 80 > "$OUT/source_fp8math.txt" 2>&1
  head -40 "$OUT/source_fp8math.txt" | cut -c1-160
fi
echo "total $(( $(date +%s) - start )) s"
