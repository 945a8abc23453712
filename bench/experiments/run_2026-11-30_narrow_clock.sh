#!/usr/bin/env bash
# Prepared in session 55 (NOTES item 80 d), one call (carry .whl; ~300 s): is the narrow fp8 MLA
# kernel bound by its warpgroups' chains at the machine's real SM clock? Session 55's ncu (clocks
# locked at 1.30 GHz) had it chain-bound (26% tensor pipe, 46% issue, 141K cycles for 64 tiles of
# ~1,950 cycles a block), yet shorter chain segments (V^T fragments loaded ahead, per m-block
# buffers, 4 raw stages, P'^T as words, S^T with 3 or 4 partial accumulators) all measured level.
# The probe's new stamps (trace.cuh: clock64 + global timer) give the clock during the traced call;
# nvidia-smi sampled during a bench loop gives the clock and throttle reasons outside the probe.
# Then the timelines of HEAD and of s_parts3 side by side: if a segment shrank and the period did
# not, the segment after it (or the tile's wait, 110 -> 102) took the slack.
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
rm -rf /tmp/ab_src_s3 && mkdir -p /tmp/ab_src_s3
tar --exclude=./abtmp --exclude=./.whl --exclude=./build --exclude=./.git -cf - . | tar -xf - -C /tmp/ab_src_s3
patch -d /tmp/ab_src_s3 -p1 --quiet < $E/2026-11-29_narrow_s_parts3.patch || { echo "PATCH FAILED"; exit 1; }
trace_build . /tmp/trace_base "$OUT/trace_build_base.log" &
trace_build /tmp/ab_src_s3 /tmp/trace_s3 "$OUT/trace_build_s3.log" &
build_into /tmp/jp  # (cd /tmp, the package first on PYTHONPATH)
wait
echo "builds done $(( $(date +%s) - start )) s"
reasons=clocks_event_reasons.active  # (older drivers: clocks_throttle_reasons.active)
nvidia-smi --query-gpu=$reasons --format=csv,noheader > /dev/null 2>&1 || reasons=clocks_throttle_reasons.active
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,$reasons \
  --format=csv -lms 50 > "$OUT/smi.csv" 2>&1 &
smi=$!
timeout 120 python3 "$R/bench/bench.py" --ours-only --ours-step --out "$OUT/bench" --only mla_fp8_h16_b128_ctx4k > "$OUT/bench.log" 2>&1
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
  TRACE_LINES=12 TRACE_LIMIT=70 trace_run $v /tmp/trace_$v 16 128 4096 --cache=fp8
done
echo "total $(( $(date +%s) - start )) s"
