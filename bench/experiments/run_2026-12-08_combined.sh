#!/usr/bin/env bash
# Session 61: run_2026-12-08_wide_prologue.sh and run_2026-12-08_wgmma_epilogue.sh folded into two
# calls (the device budget after a slow start holds no more): one build of base, qc and ec (a2: A2=1).
#   PART=1 (~480 s, P1_END): the four builds at once; each patch's bit-for-bit check against base
#     (wide_bitwise.py of the qc tree for qc and a2, wgmma_bitwise.py of the ec tree for ec);
#     qc's wide-kernel cases, then ec's MLA cases, each under a time limit.
#   PART=2 (~360 s, right after, AB_REUSE): ROUNDS (2) alternating rounds of base/qc(/a2) on two wide
#     configs, then of base/ec on three 16-bit MLA configs.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
WIDE=(base=. qc=patch:$E/2026-12-08_wide_q_compact.patch)
# A2=1: a2 too (the device budget of session 61 left it out)
[[ -n ${A2:-} ]] && WIDE+=(a2=patch:$E/2026-12-07_wide_q_first_a2.patch)
WG=(base=. ec=patch:$E/2026-12-08_mla_bf16_epilogue_compact.patch)
if [[ ${PART:-1} == one ]]; then
  # PART=one V=qc|ec (~450 s): one patch in one call - build base and it, its bit-for-bit check, its
  # tests (under a limit), then two alternating rounds on its configs.
  if [[ $V == qc ]]; then VS=("${WIDE[@]:0:2}") BW=wide_bitwise.py TF="test_fp8.py test_mla_sparse.py" TL=110 \
    CF=${CF:-"sparse_fp8math_h128_b64_topk2048 mla_656fp8math_h128_b64_ctx4k"}
  else VS=("${WG[@]}") BW=wgmma_bitwise.py TF="test_mla_decode.py test_mla_sparse.py test_fp8.py" TL=170 \
    CF=${CF:-"mla_h128_b64_ctx4k mla_h64_b128_ctx4k"}; fi
  AB_REUSE=1 OUT=$OUT timeout 200 bash bench/ab.sh 0 "${VS[@]}" > "$OUT/ab_build.log" 2>&1
  grep -E "BUILD|PATCH|builds" "$OUT/ab_build.log" | cut -c1-150 | head -4
  (cd /tmp && PYTHONPATH=/tmp/ab_base:$PYTHONPATH timeout 100 python3 -P /tmp/ab_src_$V/$E/$BW save /tmp/b_base.npz &&
    PYTHONPATH=/tmp/ab_$V:$PYTHONPATH timeout 100 python3 -P /tmp/ab_src_$V/$E/$BW compare /tmp/b_base.npz) > "$OUT/bitwise.log" 2>&1
  grep -E "cut\)|DIFFERS|bitwise|Error" "$OUT/bitwise.log" | sort | uniq -c | sort -rn | head -12
  echo "bitwise: $(( $(date +%s) - start )) s"
  one_tests() {
  (cd /tmp && PYTHONPATH=/tmp/ab_$V:$PYTHONPATH timeout $(( AB_FIRST ? ${ONE_END:-560} - ($(date +%s) - start) : TL )) python3 -m pytest -q -p no:cacheprovider \
    $(for f in $TF; do echo /tmp/ab_src_$V/tests/$f; done) -k mla -n 14 > "$OUT/tests_$V.log" 2>&1
  echo "tests of $V: rc $? - $(tail -1 "$OUT/tests_$V.log")"; grep -E "^(FAILED|ERROR)" "$OUT/tests_$V.log" | head -8)
  }
  one_ab() {
  AB_REUSE=1 OUT=$OUT/ab timeout $(( AB_FIRST ? 170 : ${ONE_END:-560} - ($(date +%s) - start) )) bash bench/ab.sh 2 "${VS[@]}" -- --ours-step \
    --only $CF > "$OUT/ab.log" 2>&1
  grep -E "^==|^(mla|sparse)_|FAILED|total" "$OUT/ab.log" | cut -c1-130 | tail -12
  }
  # AB_FIRST=1 (a short budget): the timing first (CF may be narrowed), the tests in what is left.
  AB_FIRST=${AB_FIRST:-0}
  if (( AB_FIRST )); then one_ab; one_tests; else one_tests; one_ab; fi
elif [[ ${PART:-1} == 1 ]]; then
  AB_REUSE=1 OUT=$OUT timeout 280 bash bench/ab.sh 0 "${WIDE[@]}" "${WG[1]}" > "$OUT/ab_build.log" 2>&1
  grep -E "BUILD|PATCH|builds" "$OUT/ab_build.log" | cut -c1-150 | head -6
  WB=/tmp/ab_src_qc/$E/wide_bitwise.py GB=/tmp/ab_src_ec/$E/wgmma_bitwise.py
  (cd /tmp && PYTHONPATH=/tmp/ab_base:$PYTHONPATH timeout 120 python3 -P "$WB" save /tmp/wb_base.npz &&
    for v in qc ${A2:+a2}; do echo "== $v"; PYTHONPATH=/tmp/ab_$v:$PYTHONPATH timeout 120 python3 -P "$WB" compare /tmp/wb_base.npz; done) \
    > "$OUT/bitwise_wide.log" 2>&1 &
  (cd /tmp && PYTHONPATH=/tmp/ab_base:$PYTHONPATH timeout 120 python3 -P "$GB" save /tmp/wg_base.npz &&
    PYTHONPATH=/tmp/ab_ec:$PYTHONPATH timeout 120 python3 -P "$GB" compare /tmp/wg_base.npz) > "$OUT/bitwise_wgmma.log" 2>&1 &
  wait
  grep -E "^==|DIFFERS|bitwise|Error" "$OUT/bitwise_wide.log" | head -10
  grep -E "cut\)|DIFFERS|bitwise|Error" "$OUT/bitwise_wgmma.log" | sort | uniq -c | sort -rn | head -12
  echo "bitwise: $(( $(date +%s) - start )) s"
  cd /tmp
  t=/tmp/ab_src_qc/tests
  PYTHONPATH=/tmp/ab_qc:$PYTHONPATH timeout 130 python3 -m pytest -q -p no:cacheprovider $t/test_fp8.py $t/test_mla_sparse.py \
    -k mla -n 12 > "$OUT/tests_qc.log" 2>&1
  echo "tests of qc: rc $? - $(tail -1 "$OUT/tests_qc.log")"; grep -E "^(FAILED|ERROR)" "$OUT/tests_qc.log" | head -8
  t=/tmp/ab_src_ec/tests
  PYTHONPATH=/tmp/ab_ec:$PYTHONPATH timeout $(( ${P1_END:-480} - ($(date +%s) - start) )) python3 -m pytest -q -p no:cacheprovider \
    $t/test_mla_decode.py $t/test_mla_sparse.py $t/test_fp8.py -k mla -n 12 > "$OUT/tests_ec.log" 2>&1
  echo "tests of ec: rc $? - $(tail -1 "$OUT/tests_ec.log")"; grep -E "^(FAILED|ERROR)" "$OUT/tests_ec.log" | head -8
else
  AB_REUSE=1 OUT=$OUT/wide timeout 300 bash bench/ab.sh ${ROUNDS:-2} "${WIDE[@]}" -- --ours-step --only \
    sparse_fp8math_h128_b64_topk2048 mla_656fp8math_h128_b64_ctx4k > "$OUT/ab_wide.log" 2>&1
  grep -E "^==|^(mla|sparse)_|FAILED|total" "$OUT/ab_wide.log" | cut -c1-130 | tail -16
  AB_REUSE=1 OUT=$OUT/wg timeout $(( 585 - ($(date +%s) - start) )) bash bench/ab.sh ${ROUNDS:-2} "${WG[@]}" -- --ours-step --only \
    mla_h128_b64_ctx4k mla_h64_b128_ctx4k mla_h128_b4_ctx4k > "$OUT/ab_wg.log" 2>&1
  grep -E "^==|^mla_|FAILED|total" "$OUT/ab_wg.log" | cut -c1-130 | tail -16
fi
echo "total $(( $(date +%s) - start )) s"
