#!/usr/bin/env bash
# Session 56, call 1 (carry .whl; ~450 s): what session 55 owed on a GPU (NOTES item 80 i) and its
# prepared narrow-clock run (run_2026-11-30_narrow_clock.sh, item 80 e), in one call.
#  1. test_cache_write, test_decode_loop and test_fp8's write / quantize cases on the GPU (a1613dd's
#     one-head write_rows form for MLA caches, 7048ef4's exact fp8 quantizing);
#  2. bench/serving_ops.py's write_kv of 16K tokens, bf16 and fp8 (session 38: fp8 26-33 us), the
#     quantizing pass now ~25 more elementwise ops a value;
#  3. the SM clock during the narrow fp8 MLA kernel (probe stamps + nvidia-smi), HEAD's and s3's
#     timelines.
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
export PYTHONUNBUFFERED=1
rm -rf /tmp/ab_src_s3 && mkdir -p /tmp/ab_src_s3
tar --exclude=./abtmp --exclude=./.whl --exclude=./build --exclude=./.git -cf - . | tar -xf - -C /tmp/ab_src_s3
patch -d /tmp/ab_src_s3 -p1 --quiet < $E/2026-11-29_narrow_s_parts3.patch || { echo "PATCH FAILED"; exit 1; }
trace_build . /tmp/trace_base "$OUT/trace_build_base.log" &
trace_build /tmp/ab_src_s3 /tmp/trace_s3 "$OUT/trace_build_s3.log" &
build_into /tmp/jp
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 "$R/tests/test_cache_write.py" "$R/tests/test_decode_loop.py" \
  "$R/tests/test_fp8.py" -k "not mla or traced_kv_scale or write or loop" > "$OUT/tests.log" 2>&1
echo "tests rc $?: $(tail -1 "$OUT/tests.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -8
wait
echo "builds done $(( $(date +%s) - start )) s"
timeout 150 python3 "$R/bench/serving_ops.py" --out "$OUT" --variants write_kv --tokens 16384 --no-sinks \
  > "$OUT/serving.log" 2>&1
echo "serving rc $?"
grep -E "tokens" "$OUT/serving.log" | cut -c1-130
reasons=clocks_event_reasons.active
nvidia-smi --query-gpu=$reasons --format=csv,noheader > /dev/null 2>&1 || reasons=clocks_throttle_reasons.active
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,$reasons \
  --format=csv -lms 50 > "$OUT/smi.csv" 2>&1 &
smi=$!
timeout 100 python3 "$R/bench/bench.py" --ours-only --ours-step --out "$OUT/bench" --only mla_fp8_h16_b128_ctx4k > "$OUT/bench.log" 2>&1
kill $smi 2>/dev/null
grep -E "^mla" "$OUT/bench.log" | cut -c1-110
python3 - "$OUT/smi.csv" <<'PY'
import collections, sys
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l[0].isdigit()]
if not rows:
    sys.exit("nvidia-smi: no samples: " + open(sys.argv[1]).read()[:300])
sm = [int(r[0].split()[0]) for r in rows]
busy = sorted(s for s in sm if s > 0)
print(f"nvidia-smi: {len(rows)} samples; SM clock MHz min {min(sm)} median {busy[len(busy) // 2]} max {max(sm)} "
      f"(max clock {rows[0][1]}); power W max {max(float(r[3].split()[0]) for r in rows):.0f} of {rows[0][4]}; "
      f"reasons {collections.Counter(r[6] for r in rows).most_common(3)}")
PY
cd "$R" || exit 1
for v in base s3; do
  TRACE_LINES=14 TRACE_LIMIT=60 trace_run $v /tmp/trace_$v 16 128 4096 --cache=fp8
done
echo "total $(( $(date +%s) - start )) s"
