#!/usr/bin/env bash
# Session 46's plan for session 47 (NOTES item 71): the A/B of the wide kernel's pipelining patches
# and a winner's checks. Carry .whl. Steps, each one call (~560 s):
#   STEP=ab [ROUNDS=2] [VARIANTS=...]: base and the variants built (bench/ab.sh; kept if built earlier
#     in this machine's session), then ROUNDS rounds of all of them on CONFIGS, one process on the
#     machine at a time (timings of bench processes running at once on a machine's GPUs are not
#     trusted: on four H200s, decode_b1_ctx8k took 0.163 ms a call and 25.0 us a layer with four
#     at once against 0.039 / 16.9 alone, NOTES item 71 d).
#   STEP=check VARIANT=NAME: NAME's build (and its sanitizer driver) if missing, then its sparse/MLA
#     GPU tests (two halves), memcheck and synccheck of its MLA driver cases, dealt over the
#     machine's GPUs (one job a GPU at a time; on one GPU in turn, so name a kind of 2-4 GPUs:
#     correctness only, no timing).
# The full bench stays one process at a time: run_2026-11-28_full_bench.sh PART=1, PART=2.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
STEP=${STEP:-ab}
NGPU=$(nvidia-smi -L | wc -l)
echo "$NGPU GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | tr -s ' ')"
CONFIGS="sparse_f16_h128_b64_topk2048 sparse_h128_b128_topk2048 mla_fp8_h128_b64_ctx4k"
ALL="base=. sets3=patch:$E/2026-11-29_wide_a_sets3.patch nodrain=patch:$E/2026-11-29_wide_sparse_no_drain.patch
  sets4nd=patch:$E/2026-11-29_wide_a_sets4_no_drain.patch scf16=patch:$E/2026-11-29_ds_scale_pairs_f16.patch"
# (all five and two rounds do not fit one call: base, sets3 and sets4nd by default)
VARIANTS=${VARIANTS:-"base=. sets3=patch:$E/2026-11-29_wide_a_sets3.patch sets4nd=patch:$E/2026-11-29_wide_a_sets4_no_drain.patch"}
left() { echo $(( ${1:-585} - ($(date +%s) - start) )); }
# deal K CMD: job K (0-based) of a list goes to GPU K % NGPU; run_dealt waits for all.
declare -A QUEUE
deal() {
  local gpu=$(( $1 % NGPU ))
  shift
  QUEUE[$gpu]+="$*"$'\n'
}
run_dealt() {
  local gpu
  for gpu in "${!QUEUE[@]}"; do
    (while IFS= read -r cmd; do [[ -n $cmd ]] && CUDA_VISIBLE_DEVICES=$gpu bash -c "$cmd" < /dev/null; done <<< "${QUEUE[$gpu]}") &
  done
  wait
  QUEUE=()
}
if [[ $STEP == ab ]]; then
  ROUNDS=${ROUNDS:-2}
  # shellcheck disable=SC2086
  AB_REUSE=1 OUT=$OUT/ab timeout "$(left 585)" bash bench/ab.sh "$ROUNDS" $VARIANTS -- --ours-step --only $CONFIGS \
    > "$OUT/ab_run.log" 2>&1
  grep -E "builds|FAILED" "$OUT/ab_run.log"
  grep -E "^==|^(mla|sparse)" "$OUT/ab/ab.log" | cut -c1-120
else
  name=${VARIANT:?STEP=check needs VARIANT=NAME}
  src=$(for v in $ALL; do [[ ${v%%=*} == "$name" ]] && echo "${v#*=}"; done)
  [[ -n $src ]] || { echo "no variant $name"; exit 1; }
  # shellcheck disable=SC2086
  AB_REUSE=1 OUT=$OUT/ab_build timeout 300 bash bench/ab.sh 0 "$name=$src" > "$OUT/ab_build.log" 2>&1 &
  abp=$!
  sleep 8  # (ab.sh has copied and patched the tree)
  [[ -x /tmp/san_$name/jaxpaged_sanitize ]] || sanitizer_build "$name"
  wait $abp
  [[ -n ${san_pid:-} ]] && wait "$san_pid"
  echo "builds done $(( $(date +%s) - start )) s"
  ts=/tmp/ab_src_$name/tests
  t="cd /tmp && PYTHONPATH=/tmp/ab_$name:/tmp/site timeout \$(( 585 - (\$(date +%s) - $start) )) python3 -m pytest -v -p no:cacheprovider -n 8 -rf"
  deal 0 "$t $ts/test_mla_sparse.py > $OUT/tests_${name}_sparse.log 2>&1; echo \"sparse tests rc \$?: \$(tail -1 $OUT/tests_${name}_sparse.log)\""
  deal 1 "$t $ts/test_fp8.py -k 'mla' > $OUT/tests_${name}_fp8.log 2>&1; echo \"fp8 mla tests rc \$?: \$(tail -1 $OUT/tests_${name}_fp8.log)\""
  export -f sanitize_mla  # (run_lib.sh's, for the dealt commands' shells)
  export OUT start
  deal 2 "sanitize_mla memcheck $name"
  deal 3 "sanitize_mla synccheck $name"
  run_dealt
  grep -hE "^(FAILED|ERROR)" "$OUT"/tests_"$name"_*.log | cut -c1-200 | head
fi
# (everything in one archive: at most 8 files come back from $OUT)
(cd "$OUT" && tar -czf /tmp/logs_$STEP.tar.gz . && rm -rf ./* && mv /tmp/logs_$STEP.tar.gz .)
echo "total $(( $(date +%s) - start )) s"
