#!/usr/bin/env bash
# Prepared in session 45 (NOTES item 70 c-d), not run. Two calls on one warm machine (kind
# nvidia-h100-x1, carry .whl): the wide kernel's epilogue and O^T's scale pairs.
#   PART=1 (~560 s): builds base (HEAD), st16 (2026-11-29_wide_epilogue_16b.patch: the epilogue's
#     stores 16 bytes a lane after a lane exchange, where each lane stored 4-byte pairs) and
#     scpairs (2026-11-29_ds_scale_pairs_pf.patch: item 69 g's scale pairs, the float16 reading's
#     loaded a k-step group ahead), the timeline probes of base and st16 beside; the
#     traces of both (sparse f16 / bf16 readings, dense per-tensor fp8; the epilogue's marks 79, 81,
#     82, 80 in each report's "sequence start" line); st16's tests (its stores serve every wide
#     instance: whole sequences in bf16, cut ones as float partials).
#   PART=2 (~560 s): scpairs' tests, then 2 rounds base / st16 / scpairs per call and per layer.
# Session 45's traces put ~20K cycles (11% of the block) in the sparse epilogue from DRAM (13-14K
# with the pool in L2; the wgmma kernel's epilogue ~8.7K): the marks split it into the sums' barrier,
# the first half of the rows and the second.
#   run tool: command "PART=1 bash bench/experiments/run_2026-11-29_epilogue_and_pairs.sh", then PART=2
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
PART=${PART:-1}
CONFIGS="sparse_f16_h128_b64_topk2048 sparse_h128_b128_topk2048 mla_fp8_h128_b64_ctx4k mla_656f16_h128_b64_ctx4k"
if [[ $PART == 1 ]]; then
  OUT=$OUT/ab timeout 330 bash bench/ab.sh 0 base=. st16=patch:$E/2026-11-29_wide_epilogue_16b.patch \
    scpairs=patch:$E/2026-11-29_ds_scale_pairs_pf.patch > "$OUT/ab_build.log" 2>&1 &
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
  TS=/tmp/ab_src_st16/tests
  (cd /tmp && PYTHONPATH=/tmp/ab_st16:/tmp/site timeout $(( 575 - ($(date +%s) - start) )) python3 -m pytest -v --durations=12 \
    -p no:cacheprovider -n 8 -rf $TS/test_mla_sparse.py $TS/test_fp8.py -k "mla or sparse or 656" \
    > "$OUT/tests_st16.log" 2>&1)
  echo "tests of st16: rc $? - $(tail -1 "$OUT/tests_st16.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/tests_st16.log" | cut -c1-200 | head
else
  [[ -d /tmp/ab_scpairs/jaxpaged ]] || { echo "fresh machine: run PART=1 first"; exit 1; }
  TS=/tmp/ab_src_scpairs/tests
  (cd /tmp && PYTHONPATH=/tmp/ab_scpairs:/tmp/site timeout 170 python3 -m pytest -v --durations=12 -p no:cacheprovider -n 8 -rf \
    $TS/test_mla_sparse.py $TS/test_fp8.py -k "sparse or (656 and not huge) or round_to_f16" > "$OUT/tests_scpairs.log" 2>&1)
  echo "tests of scpairs: rc $? - $(tail -1 "$OUT/tests_scpairs.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/tests_scpairs.log" | cut -c1-200 | head
  AB_REUSE=1 OUT=$OUT/ab timeout $(( 585 - ($(date +%s) - start) )) bash bench/ab.sh 2 base=. \
    st16=patch:$E/2026-11-29_wide_epilogue_16b.patch scpairs=patch:$E/2026-11-29_ds_scale_pairs_pf.patch \
    -- --ours-step --only $CONFIGS > "$OUT/ab_run.log" 2>&1
  grep -E "^==|^(mla|sparse)" "$OUT/ab/ab.log" | cut -c1-120
  rm -rf "$OUT"/ab/*_[12]
fi
# (everything in one archive: at most 8 files come back from $OUT)
(cd "$OUT" && tar -czf /tmp/logs_part$PART.tar.gz . && rm -rf ./* && mv /tmp/logs_part$PART.tar.gz .)
echo "total $(( $(date +%s) - start )) s"
