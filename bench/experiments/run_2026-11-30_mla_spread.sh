#!/usr/bin/env bash
# Prepared in session 39, not run: where the MLA h128 run-to-run spread comes from (NOTES item 60 b:
# mla_h128_b128_ctx8k per call 0.545-0.598 ms over seven runs of one build, FlashMLA's 0.523-0.532
# in the same runs). HEAD built once; bench.py --only mla_h128_b128_ctx8k mla_h128_b64_ctx4k (ours
# and FlashMLA, per call and per layer) five times in fresh processes while nvidia-smi logs the SM
# clock, power and throttle reasons every 100 ms; mla_spread_table.py prints per run our time,
# FlashMLA's, and the clock / power over the run's window. A clock or power limit shows as our slow
# runs at lower clocks (then FlashMLA's should move too unless its load draws less power); equal
# clocks across runs put the spread in the kernel (the split schedule's balance, the seesaw's phase).
#   run tool: command "bash bench/experiments/run_2026-11-30_mla_spread.sh", carry [".whl"], kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
build_into /tmp/jp
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$OUT/smi.csv" 2>&1 &
smi=$!
for i in 1 2 3 4 5; do
  echo "run $i start $(date +%s.%N)" >> "$OUT/windows.txt"
  timeout 100 python3 "$R/bench/bench.py" --out "$OUT/run$i" --only mla_h128_b128_ctx8k mla_h128_b64_ctx4k \
    > "$OUT/run$i.log" 2>&1
  echo "run $i end $(date +%s.%N)" >> "$OUT/windows.txt"
  grep -E "^mla" "$OUT/run$i.log" | cut -c1-140
  (( $(date +%s) - start > 520 )) && break
done
kill $smi
python3 "$R/bench/experiments/mla_spread_table.py" "$OUT"
echo "total $(( $(date +%s) - start )) s"
