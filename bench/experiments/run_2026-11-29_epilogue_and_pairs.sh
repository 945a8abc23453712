#!/usr/bin/env bash
# Prepared in session 45 (NOTES item 70 c-d, g), not run. Three calls on one warm machine (kind
# nvidia-h100-x1, carry .whl): the wide kernel's epilogue, O^T's scale pairs, the speculative P^T.
# Variants (bench/ab.sh trees /tmp/ab_src_NAME, builds /tmp/ab_NAME):
#   base    HEAD
#   st16    2026-11-29_wide_epilogue_16b.patch: the epilogue's stores 16 bytes a lane after a lane
#           exchange (each lane stored 4-byte pairs)
#   scpairs 2026-11-29_ds_scale_pairs_pf.patch: item 69 g's scale pairs, the float16 reading's
#           loaded a k-step group ahead
#   spec    2026-11-30_wide_spec_p_on_scpairs.patch: scpairs + P^T stored speculatively before the
#           vote's barrier (one pass over the scores, one barrier a pair where no score exceeds)
#   PART=1 (~560 s): the four builds, the timeline probes of base and st16 beside; their traces
#     (sparse f16 / bf16 readings, dense per-tensor fp8; the epilogue's marks 79, 81, 82, 80 in each
#     report's "sequence start" line); st16's tests (its stores serve every wide instance: whole
#     sequences in bf16, cut ones as float partials).
#   PART=2 (~560 s): spec's tests (they cover scpairs' code too), then one round of the four.
#   PART=3 (~560 s): the second round, then memcheck and synccheck of spec's MLA cases.
# Session 45's traces put ~20K cycles (11% of the block) in the sparse epilogue from DRAM (13-14K
# with the pool in L2; the wgmma kernel's epilogue ~8.7K): the marks split it into the sums' barrier,
# the first half of the rows and the second.
#   run tool: command "PART=1 bash bench/experiments/run_2026-11-29_epilogue_and_pairs.sh", then
#   PART=2 and PART=3 at once (the machine stays warm 30 s between calls)
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
PART=${PART:-1}
CONFIGS="sparse_f16_h128_b64_topk2048 sparse_h128_b128_topk2048 mla_fp8_h128_b64_ctx4k"
VARIANTS="base=. st16=patch:$E/2026-11-29_wide_epilogue_16b.patch scpairs=patch:$E/2026-11-29_ds_scale_pairs_pf.patch
  spec=patch:$E/2026-11-30_wide_spec_p_on_scpairs.patch"
# variant_pytest NAME LIMIT -k EXPR: the MLA test files of that variant's tree on its build, verbose
# (a cut run's unfinished tests are then known), log $OUT/tests_NAME.log, its last line printed.
variant_pytest() {
  local name=$1 limit=$2 ts=/tmp/ab_src_$1/tests
  shift 2
  (cd /tmp && PYTHONPATH=/tmp/ab_$name:/tmp/site timeout "$limit" python3 -m pytest -v --durations=12 \
    -p no:cacheprovider -n 8 -rf $ts/test_mla_sparse.py $ts/test_fp8.py "$@" > "$OUT/tests_$name.log" 2>&1)
  echo "tests of $name: rc $? - $(tail -1 "$OUT/tests_$name.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/tests_$name.log" | cut -c1-200 | head
}
# (ab_round: run_lib.sh's, one round of the four built in PART=1)
if [[ $PART == 1 ]]; then
  # shellcheck disable=SC2086
  OUT=$OUT/ab timeout 360 bash bench/ab.sh 0 $VARIANTS > "$OUT/ab_build.log" 2>&1 &
  bp=$!
  trace_build . /tmp/trace_base "$OUT/trace_build_base.log" &
  tb=$!
  # (ab.sh starts a variant's build once its tree is copied and patched: its build log then exists)
  for _ in $(seq 120); do [[ -f $OUT/ab/build_st16.log ]] && break; sleep 1; done
  trace_build /tmp/ab_src_st16 /tmp/trace_st16 "$OUT/trace_build_st16.log"
  wait $tb $bp
  grep -E "builds|FAILED" "$OUT/ab_build.log"
  for v in base st16; do
    TRACE_LINES=3 trace_run ${v}_f16_sparse /tmp/trace_$v 128 64 4096 --cache=656f16 --topk=2048
    TRACE_LINES=3 trace_run ${v}_bf16_sparse /tmp/trace_$v 128 64 4096 --cache=656 --topk=2048
    TRACE_LINES=3 trace_run ${v}_fp8 /tmp/trace_$v 128 64 4096 --cache=fp8
  done
  variant_pytest st16 $(( 575 - ($(date +%s) - start) )) -k "mla or sparse or 656"
elif [[ $PART == 2 ]]; then
  [[ -d /tmp/ab_spec/jaxpaged ]] || { echo "fresh machine: run PART=1 first"; exit 1; }
  variant_pytest spec 240 -k "sparse or mla_656 or mla_quantized_caches or mla_fp8_math or mla_row_without or mla_fp8_queries"
  ab_round $(( 585 - ($(date +%s) - start) ))
else
  [[ -d /tmp/ab_spec/jaxpaged ]] || { echo "fresh machine: run PART=1 first"; exit 1; }
  ab_round 330
  # (built after the timing: a build beside it would load the host that dispatches the calls)
  sanitizer_build spec
  memcheck_mla spec
  sanitize_mla synccheck spec 590
fi
# (everything in one archive: at most 8 files come back from $OUT)
(cd "$OUT" && tar -czf /tmp/logs_part$PART.tar.gz . && rm -rf ./* && mv /tmp/logs_part$PART.tar.gz .)
echo "total $(( $(date +%s) - start )) s"
