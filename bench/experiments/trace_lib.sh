# Sourced by the run scripts that use the MLA kernel's timeline probe (tools/mla_trace.cu,
# tools/mla_trace_report.py; NOTES item 53).
TRACE_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# trace_build SRC_TREE BUILD_DIR LOG: the probe of that source tree (sm_90a), built in BUILD_DIR.
trace_build() {
  cmake -S "$1" -B "$2" -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_MLA_TRACE_DRIVER=ON -DJAXPAGED_CUDA_ARCHS=90a \
    > "$3" 2>&1 && ninja -C "$2" jaxpaged_mla_trace >> "$3" 2>&1
}

# trace_report BUILD_DIR RECORDS REPORT [HEADS BATCH KV_LEN]: one traced call of that shape (default
# Hq 128, B 64, 4096 keys), its records in RECORDS and their per-pair medians in REPORT.
trace_report() {
  local dir=$1 records=$2 report=$3
  shift 3
  [[ $# -eq 0 ]] && set -- 128 64 4096
  "$dir/jaxpaged_mla_trace" "$records" "$@" > /dev/null &&
    python3 "$TRACE_REPO/tools/mla_trace_report.py" "$records" > "$report" 2>&1
}

# trace_variants LOG_DIR NAME...: the probe of each variant tree bench/ab.sh made
# (/tmp/ab_src_NAME), built in parallel (logs in LOG_DIR), then one traced call of each:
# $OUT/trace_NAME.txt, its first line (the pair period) printed.
trace_variants() {
  local logdir=$1 v
  shift
  for v in "$@"; do
    trace_build /tmp/ab_src_$v /tmp/trace_$v "$logdir/trace_build_$v.log" &
  done
  wait
  for v in "$@"; do
    trace_report /tmp/trace_$v /tmp/tr_$v.bin "$OUT/trace_$v.txt"
    head -1 "$OUT/trace_$v.txt"
  done
}

# trace_run NAME BUILD_DIR ARGS...: one traced call of that build's probe (ARGS as
# tools/mla_trace.cu takes them after the records' path; under TRACE_LIMIT seconds, default 60),
# its report in $OUT/trace_NAME.txt and the report's first lines printed (TRACE_LINES, default 48).
trace_run() {
  local name=$1 dir=$2
  shift 2
  timeout "${TRACE_LIMIT:-60}" "$dir/jaxpaged_mla_trace" /tmp/tr_$name.bin "$@" > "$OUT/trace_$name.txt" 2>&1 || { tail -3 "$OUT/trace_$name.txt"; return; }
  python3 "$TRACE_REPO/tools/mla_trace_report.py" /tmp/tr_$name.bin >> "$OUT/trace_$name.txt" 2>&1
  echo "== trace $name"; head -"${TRACE_LINES:-48}" "$OUT/trace_$name.txt" | cut -c1-150
}
