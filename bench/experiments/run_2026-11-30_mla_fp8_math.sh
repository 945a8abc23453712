#!/usr/bin/env bash
# Run in session 40 (NOTES item 63): f8 with the API patch landed (mla_decode(..., fp8_math=True));
# _promote and _stages4 measured and not kept; the f8 and API patches no longer apply to main.
# Prepared in session 39: the wide fp8 MLA kernel's fp8-math mode (NOTES item 61;
# 2026-11-30_mla_fp8_math.patch, on unless JAXPAGED_MLA_FP8_MATH=0): S^T = K Q^T as SS m64n64k32
# e4m3 (A the raw tile, Q^T e4m3 x 2^k per row), P^T e4m3, O^T += V^T P^T as RS m64n64k32 with the
# raw bytes as A - no conversions, half the tensor cycles. Predicted (item 59 j) 0.095-0.105 ms on
# mla_fp8_h128_b64_ctx4k (HEAD 0.155, FlashMLA's fp8 kernel 0.116 on the same cache, 2026-11-27).
# The default instance's PTX is unchanged by every patch (checked locally). Variants:
#   f8    the mode (O summed in the fp8 accumulator across all tiles, as FlashMLA's kernel);
#   f8p   + _promote.patch: each tile's O products summed in sacc, then added in float32 (the
#         tensor cores keep fewer bits than float32 in fp8 sums: tools/wgmma_fp8_probe.cu);
#   f8s4p + _stages4.patch: a fourth raw stage in the room the smaller Q^T / P^T leave (213.9 KiB).
# PART=1 (one call): base and the three built (bench/ab.sh); 2 rounds of the two h128 fp8 configs
#   per call and per layer; then in the time left mla_fp8_math_check.py on f8p, f8, the f16 path (f8
#   with JAXPAGED_MLA_FP8_MATH=0) and f8s4p (errors against the reference incl. 16K / 32K and flat
#   attention, NaN / zero patterns).
# PART=2 (the next call, at once; reuses the builds on a warm machine): VARIANT (default f8s4p)
#   under bench.py with the peers (FlashMLA's fp8 kernel beside, both errors) on the three fp8 MLA
#   configs, then memcheck of its MLA driver cases in the time left.
# PART=3 (the landing check, if the mode gains): the API patch (2026-11-30_mla_fp8_math_api.patch:
#   mla_decode(..., fp8_math=False), tests/test_fp8.py's bound test, the bench's fp8math configs, a
#   sanitizer case) on f8 + EXTRA (default "_stages4 _promote": the variants' patch suffixes): its
#   test_fp8.py on the GPU, bench.py with the peers on the fp8 MLA configs, memcheck.
#   run tool: command "PART=1 bash bench/experiments/run_2026-11-30_mla_fp8_math.sh", carry [".whl"], kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
repo=$(pwd)
f8=patch:$E/2026-11-30_mla_fp8_math.patch
f8p=$f8+$E/2026-11-30_mla_fp8_math_promote.patch
f8s4p=$f8+$E/2026-11-30_mla_fp8_math_stages4.patch+$E/2026-11-30_mla_fp8_math_promote.patch
variants=(base=. f8=$f8 f8p=$f8p f8s4p=$f8s4p)
if [[ ${PART:-1} == 1 ]]; then
  OUT=$OUT/ab timeout 330 bash bench/ab.sh 0 "${variants[@]}" > "$OUT/ab_build.log" 2>&1
  grep -E "builds|FAILED" "$OUT/ab_build.log"
  echo "builds done $(( $(date +%s) - start )) s"
  cd "$repo"
  AB_REUSE=1 OUT=$OUT/ab timeout 240 bash bench/ab.sh 2 "${variants[@]}" -- \
    --ours-step --only mla_fp8_h128_b64_ctx4k mla_fp8_h128_b128_ctx8k > "$OUT/ab_time.log" 2>&1
  grep -E "^==|^mla" "$OUT/ab/ab.log" | cut -c1-150
  echo "timing done $(( $(date +%s) - start )) s"
  cd /tmp
  for v in f8p f8 f16 f8s4p; do  # (in the time left, most wanted first)
    left=$(( 580 - ($(date +%s) - start) ))
    (( left < 20 )) && break
    m=$([[ $v == f16 ]] && echo 0 || echo 1); b=$([[ $v == f16 ]] && echo f8 || echo $v)
    JAXPAGED_MLA_FP8_MATH=$m PYTHONPATH=/tmp/ab_$b:/tmp/site timeout $(( left < 90 ? left : 90 )) \
      python3 "$repo/$E/mla_fp8_math_check.py" > "$OUT/check_$v.log" 2>&1
    echo "check $v (build $b, JAXPAGED_MLA_FP8_MATH=$m) rc $?"
    grep -E "err|Error" "$OUT/check_$v.log" | sed "s/^[a-z0-9]* */$v /" | cut -c1-140
  done
elif [[ $PART == 3 ]]; then
  api=$f8
  for x in ${EXTRA-_stages4 _promote}; do api=$api+$E/2026-11-30_mla_fp8_math$x.patch; done
  api=$api+$E/2026-11-30_mla_fp8_math_api.patch
  OUT=$OUT/ab timeout 240 bash bench/ab.sh 0 "api=$api" > "$OUT/ab_build.log" 2>&1
  grep -E "builds|FAILED" "$OUT/ab_build.log"
  sanitizer_build api
  cd /tmp
  PYTHONPATH=/tmp/ab_api:$PYTHONPATH timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 \
    /tmp/ab_src_api/tests/test_fp8.py > "$OUT/tests_api.log" 2>&1
  echo "test_fp8 (api) rc $? - $(tail -1 "$OUT/tests_api.log")"; grep -E "^(FAILED|ERROR)" "$OUT/tests_api.log" | head
  PYTHONPATH=/tmp/ab_api:$PYTHONPATH timeout 150 python3 /tmp/ab_src_api/bench/bench.py --out "$OUT/bench_api" \
    --only mla_fp8_h128_b64_ctx4k mla_fp8math_h128_b64_ctx4k mla_fp8math_h128_b128_ctx8k > "$OUT/bench_api.log" 2>&1
  echo "bench with peers (api) rc $?"; grep -E "^mla" "$OUT/bench_api.log" | cut -c1-170
  memcheck_mla api
else
  v=${VARIANT:-f8s4p}
  if [[ ! -d /tmp/ab_$v/jaxpaged ]]; then  # (a fresh machine: build that variant alone)
    OUT=$OUT/ab timeout 240 bash bench/ab.sh 0 "$v=${!v}" > "$OUT/ab_build.log" 2>&1
    grep -E "builds|FAILED" "$OUT/ab_build.log"
  fi
  sanitizer_build $v
  cd /tmp
  PYTHONPATH=/tmp/ab_$v:$PYTHONPATH timeout 200 python3 /tmp/ab_src_$v/bench/bench.py --out "$OUT/bench_$v" \
    --only mla_fp8_h128_b64_ctx4k mla_fp8_h128_b128_ctx8k mla_fp8_h16_b128_ctx4k > "$OUT/bench_$v.log" 2>&1
  echo "bench with peers ($v) rc $?"; grep -E "^mla" "$OUT/bench_$v.log" | cut -c1-170
  memcheck_mla $v
fi
echo "total $(( $(date +%s) - start )) s"
