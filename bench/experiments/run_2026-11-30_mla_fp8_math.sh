#!/usr/bin/env bash
# Prepared in session 39, not run: the wide fp8 MLA kernel's fp8-math mode (NOTES item 61;
# 2026-11-30_mla_fp8_math.patch, on unless JAXPAGED_MLA_FP8_MATH=0): S^T = K Q^T as SS m64n64k32
# e4m3 (A the raw tile, Q^T e4m3 x 2^k per row), P^T e4m3, O^T += V^T P^T as RS m64n64k32 with the
# raw bytes as A - no conversions, half the tensor cycles. Predicted (item 59 j) 0.095-0.105 ms on
# mla_fp8_h128_b64_ctx4k (HEAD 0.155, FlashMLA's fp8 kernel 0.116 on the same cache, 2026-11-27).
# The default instance's PTX is unchanged by the patch (checked here). f8s4 adds
# 2026-11-30_mla_fp8_math_stages4.patch: the mode's smaller Q^T (40 KiB) and P^T (8 KiB) leave room
# for a fourth raw stage (213.9 KiB in all).
# (1) base, f8 and f8s4 built (bench/ab.sh); (2) mla_fp8_math_check.py on f8, the f16 path first
#     (JAXPAGED_MLA_FP8_MATH=0) then the mode: errors against the reference, NaN / zero patterns;
# (3) 2 rounds of the two h128 fp8 configs per call and per layer (base, f8, f8s4); (4) bench.py with the peers on
#     f8 for those configs (FlashMLA's fp8 kernel beside, both errors); (5) memcheck of f8's MLA
#     driver cases in the time left.
#   run tool: command "bash bench/experiments/run_2026-11-30_mla_fp8_math.sh", carry [".whl"], kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
repo=$(pwd)
f8=patch:$E/2026-11-30_mla_fp8_math.patch
f8s4=$f8+$E/2026-11-30_mla_fp8_math_stages4.patch
OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 base=. f8=$f8 f8s4=$f8s4 > "$OUT/ab_build.log" 2>&1 &
ab_pid=$!
sleep 8  # (ab.sh has copied and patched the trees)
san=/tmp/san_f8
(cmake -S /tmp/ab_src_f8 -B $san -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_SANITIZE_DRIVER=ON -DJAXPAGED_CUDA_ARCHS=90a > /tmp/san_build.log 2>&1 &&
  nice ninja -C $san jaxpaged_sanitize >> /tmp/san_build.log 2>&1; echo "sanitizer driver build rc $?") &
san_pid=$!
wait $ab_pid
grep -E "builds|FAILED" "$OUT/ab_build.log"
echo "builds done $(( $(date +%s) - start )) s"
cd /tmp
for m in 0 1 s4; do
  JAXPAGED_MLA_FP8_MATH=${m/s4/1} PYTHONPATH=/tmp/ab_f8${m/[01]/}:/tmp/site timeout 90 \
    python3 "$repo/$E/mla_fp8_math_check.py" > "$OUT/check_$m.log" 2>&1
  echo "check ($m: JAXPAGED_MLA_FP8_MATH=${m/s4/1}, build ab_f8${m/[01]/}) rc $?"
  grep -E "err|Error" "$OUT/check_$m.log" | cut -c1-150
done
echo "checks done $(( $(date +%s) - start )) s"
cd "$repo"
AB_REUSE=1 OUT=$OUT/ab timeout 200 bash bench/ab.sh 2 base=. f8=$f8 f8s4=$f8s4 -- --ours-step \
  --only mla_fp8_h128_b64_ctx4k mla_fp8_h128_b128_ctx8k > "$OUT/ab_time.log" 2>&1
grep -E "^==|^mla" "$OUT/ab/ab.log" | cut -c1-160
echo "timing done $(( $(date +%s) - start )) s"
cd /tmp
PYTHONPATH=/tmp/ab_f8:$PYTHONPATH timeout 120 python3 /tmp/ab_src_f8/bench/bench.py --out "$OUT/bench_f8" \
  --only mla_fp8_h128_b64_ctx4k mla_fp8_h128_b128_ctx8k > "$OUT/bench_f8.log" 2>&1
echo "bench with peers rc $?"; grep -E "^mla" "$OUT/bench_f8.log" | cut -c1-170
wait $san_pid
left=$(( 585 - ($(date +%s) - start) ))
if (( left > 30 )); then
  timeout $left compute-sanitizer --tool memcheck --error-exitcode 9 $san/jaxpaged_sanitize --mla-only \
    > "$OUT/memcheck_f8.log" 2>&1
  echo "memcheck rc $? $(grep 'ERROR SUMMARY' "$OUT/memcheck_f8.log" | tail -1) | $(tail -1 "$OUT/memcheck_f8.log")"
fi
echo "total $(( $(date +%s) - start )) s"
