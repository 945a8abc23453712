#!/usr/bin/env bash
# Prepared in sessions 60-61, not yet run (session 61's device calls were all refused): the
# prepared kernel patches, in as few calls on one warm machine as they fit. Carry .whlmin and
# .prebuilt (session 62, NOTES item 87 b: base, qn, ec, see, sk and, for a tree where qc, narrow
# and ec have landed, L, Lsee, Lsk - built here by bench/prebuild.sh, ~49 MB, found by tree hash;
# the builds then cost seconds there instead of ~100-260 s; a variant whose tree matches none is
# built there as before); no peer runs here, so .whl (32 MB) need not travel (nor fit beside).
#   qn = 2026-12-08_wide_q_compact.patch + 2026-12-09_narrow_q_compact.patch: the wide and the narrow
#        fp8 kernels' per-sequence query sections in compact code (NOTES items 85 e-f, 86). They
#        touch different kernels (fp8_wide.cu, fp8_narrow.cu), so one tree serves both: the wide
#        configs time qc, the h16 fp8 config times the narrow one.
#   ec = 2026-12-08_mla_bf16_epilogue_compact.patch: the 16-bit wgmma kernel's epilogue (item 85 h).
#   see = 2026-12-09_wide_seesaw.patch: the wide kernel's two warpgroups offset (item 86; changes
#        kF8's and kDF dense's numerics - not bit-identical there - and can hang if wrong).
# Session 63 ran PART=1, 2 and 4 (NOTES item 88): qc and ec landed, narrow and sk did not; since then
# PART=3 takes the seesaw rebased on the landed qc (2026-12-09_wide_seesaw_on_qc.patch).
# All three compact patches must leave every output bit-identical (wide_bitwise.py, narrow_bitwise.py,
# wgmma_bitwise.py of the patched trees).
#   PART=1 (~480 s): builds base (HEAD), qn, ec; the bit-for-bit checks; qn's and ec's MLA cases.
#   PART=2 (~380 s, right after, AB_REUSE): two alternating rounds, base/qn on three fp8 configs,
#     base/ec on two 16-bit ones.
#   PART=3 (~520 s): see - build, its fp8/sparse MLA cases under a time limit (a hang shows as the
#     limit), wide_bitwise twice on it (run-to-run identity: a race shows as a difference) and
#     against base (only kF8 / kDF dense may differ), two rounds base/see on the dense fp8_math configs.
#   PART=4 (~520 s): sk = 2026-12-09_mla_schedule_in_kernel.patch (item 86 f: without a plan the
#     attention kernels make their schedule, no schedule kernel; same words, so outputs identical
#     to the plan's) - build, the MLA cases incl. test_plan.py, wide_bitwise.py against base (must
#     be equal: same schedule), two rounds base/sk on three configs (ours_ms is the call without a
#     plan, ours_plan_ms with one: the gap between them is what sk should close).
#   sk2 = 2026-12-10_mla_schedule_in_kernel_capped_merge.patch: sk plus a merge grid capped near two
#        blocks an SM in that mode (item 88 f's suspect: 4,096 waiting merge blocks); PART=one V=sk2.
#   PART=one V=qn|ec|sk|sk2 (~450 s, a short budget): one patch in one call - build, bitwise, A/B first on
#     CF (default its configs) then its tests in what is left (ONE_END, default 560 s).
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
QN=(base=. qn=patch:$E/2026-12-08_wide_q_compact.patch+$E/2026-12-09_narrow_q_compact.patch)
EC=(base=. ec=patch:$E/2026-12-08_mla_bf16_epilogue_compact.patch)
SEE=(base=. see=patch:$E/2026-12-09_wide_seesaw_on_qc.patch)  # (qc and ec landed: the seesaw rebased on them)
SK=(base=. sk=patch:$E/2026-12-09_mla_schedule_in_kernel.patch)
SK2=(base=. sk2=patch:$E/2026-12-10_mla_schedule_in_kernel_capped_merge.patch)
QN_CF="sparse_fp8math_h128_b64_topk2048 mla_656fp8math_h128_b64_ctx4k mla_fp8_h16_b128_ctx4k"
EC_CF="mla_h128_b64_ctx4k mla_h64_b128_ctx4k"
SEE_CF="mla_fp8math_h128_b64_ctx4k mla_656fp8math_h128_b64_ctx4k"
SK_CF="mla_h128_b64_ctx4k mla_fp8math_h128_b64_ctx4k sparse_fp8math_h128_b64_topk2048"
# bitwise V SCRIPT...: each script of V's tree saved on base's build, then compared on V's
bitwise() {
  local v=$1 s
  shift
  for s in "$@"; do
    echo "== $v: $s"
    (cd /tmp && PYTHONPATH=/tmp/ab_base:$PYTHONPATH timeout 150 python3 -P /tmp/ab_src_$v/$E/$s save /tmp/bw_${v}_$s.npz &&
      PYTHONPATH=/tmp/ab_$v:$PYTHONPATH timeout 150 python3 -P /tmp/ab_src_$v/$E/$s compare /tmp/bw_${v}_$s.npz)
  done > "$OUT/bitwise_$v.log" 2>&1
}
# tests V LIMIT PYTEST_ARGS...: V's own tests (paths under its tree) on its build
tests() {
  local v=$1 limit=$2 a args=()
  shift 2
  for a in "$@"; do [[ $a == tests/* ]] && args+=("/tmp/ab_src_$v/$a") || args+=("$a"); done
  (cd /tmp && PYTHONPATH=/tmp/ab_$v:$PYTHONPATH timeout "$limit" python3 -m pytest -q -p no:cacheprovider "${args[@]}" \
    > "$OUT/tests_$v.log" 2>&1)
  local rc=$?
  echo "tests of $v: rc $rc - $(tail -1 "$OUT/tests_$v.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/tests_$v.log" | head -8
  if ((rc == 124)); then  # (cut at the limit: a hung kernel keeps its xdist worker, and the GPU, busy)
    pkill -9 -f "exec\(eval\(sys.stdin" && echo "tests of $v: cut at ${limit} s, workers killed"
    sleep 2
  fi
  return $rc
}
# ab NAME LIMIT VARIANT... -- CONFIG...: ROUNDS (2) alternating rounds into $OUT/NAME
ab() {
  local name=$1 limit=$2
  shift 2
  AB_REUSE=1 OUT=$OUT/$name timeout "$limit" bash bench/ab.sh "${ROUNDS:-2}" "$@" > "$OUT/ab_$name.log" 2>&1
  grep -E "^==|^(mla|sparse)_|FAILED|total" "$OUT/ab_$name.log" | cut -c1-130 | tail -16
}
left() { echo $(( $1 - ($(date +%s) - start) )); }
case ${PART:-1} in
1)
  AB_REUSE=1 OUT=$OUT timeout 280 bash bench/ab.sh 0 "${QN[@]}" "${EC[1]}" > "$OUT/ab_build.log" 2>&1
  grep -E "BUILD|PATCH|builds|prebuilt|building|reused" "$OUT/ab_build.log" | cut -c1-150 | head -10
  bitwise qn wide_bitwise.py narrow_bitwise.py &
  bitwise ec wgmma_bitwise.py &
  wait
  grep -hE "^==|DIFFERS|bitwise|Error|cut\)" "$OUT"/bitwise_{qn,ec}.log | sort | uniq -c | head -20
  echo "bitwise: $(( $(date +%s) - start )) s"
  tests qn 150 tests/test_fp8.py tests/test_mla_sparse.py -k mla -n 12
  tests ec "$(left ${P1_END:-560})" tests/test_mla_decode.py tests/test_mla_sparse.py tests/test_fp8.py -k mla -n 12
  ;;
2)
  ab qn 260 "${QN[@]}" -- --ours-step --only $QN_CF
  ab ec "$(left 585)" "${EC[@]}" -- --ours-step --only $EC_CF
  ;;
3)
  AB_REUSE=1 OUT=$OUT timeout 200 bash bench/ab.sh 0 "${SEE[@]}" > "$OUT/ab_build.log" 2>&1
  grep -E "BUILD|PATCH|builds|prebuilt|building|reused" "$OUT/ab_build.log" | cut -c1-150 | head -10
  tests see 240 tests/test_fp8.py tests/test_mla_sparse.py -k mla -n 12
  (($? == 124)) && { echo "see: no timing after a cut test run"; echo "total $(( $(date +%s) - start )) s"; exit 0; }
  WB=/tmp/ab_src_see/$E/wide_bitwise.py
  (cd /tmp && PYTHONPATH=/tmp/ab_see:$PYTHONPATH timeout 100 python3 -P $WB save /tmp/see1.npz &&
    echo "== see against itself" && PYTHONPATH=/tmp/ab_see:$PYTHONPATH timeout 100 python3 -P $WB compare /tmp/see1.npz &&
    echo "== base against see" && PYTHONPATH=/tmp/ab_base:$PYTHONPATH timeout 100 python3 -P $WB compare /tmp/see1.npz) \
    > "$OUT/bitwise_see.log" 2>&1
  grep -E "^==|DIFFERS|bitwise|Error" "$OUT/bitwise_see.log" | cut -c1-140 | head -20
  ab see "$(left 585)" "${SEE[@]}" -- --ours-step --only $SEE_CF
  ;;
4)
  AB_REUSE=1 OUT=$OUT timeout 200 bash bench/ab.sh 0 "${SK[@]}" > "$OUT/ab_build.log" 2>&1
  grep -E "BUILD|PATCH|builds|prebuilt|building|reused" "$OUT/ab_build.log" | cut -c1-150 | head -10
  tests sk 220 tests/test_plan.py tests/test_mla_decode.py tests/test_mla_sparse.py tests/test_fp8.py -k "plan or mla" -n 12
  (($? == 124)) && { echo "sk: no timing after a cut test run"; echo "total $(( $(date +%s) - start )) s"; exit 0; }
  bitwise sk wide_bitwise.py
  grep -E "^==|DIFFERS|bitwise|Error" "$OUT/bitwise_sk.log" | cut -c1-140 | head -8
  ab sk "$(left 585)" "${SK[@]}" -- --ours-step --only $SK_CF
  ;;
one)
  K=mla
  case $V in
  qn) VS=("${QN[@]}") BWS="wide_bitwise.py narrow_bitwise.py" CF=${CF:-$QN_CF} TA="tests/test_fp8.py tests/test_mla_sparse.py" ;;
  ec) VS=("${EC[@]}") BWS=wgmma_bitwise.py CF=${CF:-$EC_CF} TA="tests/test_mla_decode.py tests/test_mla_sparse.py tests/test_fp8.py" ;;
  sk | sk2) BWS=wide_bitwise.py CF=${CF:-$SK_CF} K="plan or mla"  # (its bitwise: against base, must be equal)
    if [[ $V == sk ]]; then VS=("${SK[@]}"); else VS=("${SK2[@]}"); fi
    TA="tests/test_plan.py tests/test_mla_decode.py tests/test_mla_sparse.py tests/test_fp8.py" ;;
  *) echo "V: qn, ec, sk or sk2"; exit 1 ;;
  esac
  AB_REUSE=1 OUT=$OUT timeout 200 bash bench/ab.sh 0 "${VS[@]}" > "$OUT/ab_build.log" 2>&1
  grep -E "BUILD|PATCH|builds|prebuilt|building|reused" "$OUT/ab_build.log" | cut -c1-150 | head -10
  bitwise "$V" $BWS
  grep -E "^==|DIFFERS|bitwise|Error|cut\)" "$OUT/bitwise_$V.log" | sort | uniq -c | head -12
  ab "$V" 170 "${VS[@]}" -- --ours-step --only $CF
  tests "$V" "$(left ${ONE_END:-560})" $TA -k "$K" -n 14
  ;;
esac
echo "total $(( $(date +%s) - start )) s"
