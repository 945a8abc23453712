#!/usr/bin/env bash
# Session 32, call 1 (carry .whl): (a) session 31's direct-decode A/B (run_2026-11-27_paged_direct.sh:
# it patches the tree with the env switch, default off, and builds); (b) on that build, ncu --set full
# of mla_h128_b64_ctx4k's attention kernel beside FlashMLA's dense kernel on the same inputs, with
# both source views (tools/ncu_top_lines.py): issue 16's largest large-batch gap (0.146 vs 0.121 ms).
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
REPO=$(pwd)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
bash bench/experiments/run_2026-11-27_paged_direct.sh > "$OUT/direct_run.log" 2>&1
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
cd /tmp
timeout 300 ncu --set full --import-source yes -k "regex:mla_wgmma|splitkv_mla" -c 2 -f -o "$OUT/prof" \
  python3 "$REPO/bench/profile_one.py" mla_h128_b64_ctx4k --plan --flashmla --calls 1 > "$OUT/prof_run.log" 2>&1
ncu -i "$OUT/prof.ncu-rep" --page details > "$OUT/prof_details.txt" 2>&1
for k in mla_wgmma splitkv_mla; do
  ncu -i "$OUT/prof.ncu-rep" --page source --csv --print-source sass -k "regex:$k" -c 1 > "/tmp/src_$k.csv" 2>/dev/null &&
    python3 "$REPO/tools/ncu_top_lines.py" "/tmp/src_$k.csv" 60 > "$OUT/prof_source_$k.txt" 2>&1
done
rm -f "$OUT/prof.ncu-rep"
grep -E "^  [^ ].*\(|Duration|Registers Per Thread|Executed Ipc A|Issue Slots Busy|Tensor" "$OUT/prof_details.txt" | head -30
cat "$OUT/direct_ab.log"
