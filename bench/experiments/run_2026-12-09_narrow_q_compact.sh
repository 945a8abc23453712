#!/usr/bin/env bash
# Prepared in session 61 (2026-12-09_narrow_q_compact.md), two calls back to back on one warm
# machine (carry .whl):
#   PART=1 (~450 s): builds base (HEAD) and compact (2026-12-09_narrow_q_compact.patch: the narrow
#     fp8 kernel's query section in rolled loops over chunks staged by cp.async in the exchange
#     area; 12.5 -> 3.8 KB of code a sequence), the MLA fp8 tests on compact (-n 12), then every
#     output and lse of narrow_bitwise.py (compact's copy: tools/mla_fp8_narrow_check.py's cases and
#     special and scaled queries) compared bit for bit between base and compact: must be 42 of 42.
#   PART=2 (~400 s, right after, AB_REUSE): two alternating rounds of base and compact on
#     mla_fp8_h16_b128_ctx4k, then both trees' timeline probes (built in parallel) on the same shape:
#     the query section's cycles (100 -> 101 the block's first sequence, 109 -> 101 the later ones).
# The hypothesis (as NOTES item 85 d-e for the wide kernel): the section runs once a sequence from a
# cold instruction cache at ~1.6 bytes of code a cycle, so 12.5 KB took ~8k cycles; the compact one
# should take ~3k. Predicted: 109 -> 101 and 100 -> 101 fall by ~4-5k cycles; per call a gain of
# the order of that over the block's length (level within noise is possible at ctx 4k).
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
use_peers
export PYTHONUNBUFFERED=1
VARIANTS=(base=. compact=patch:$E/2026-12-09_narrow_q_compact.patch)
if [[ ${PART:-1} == 1 ]]; then
  AB_TEST="compact:tests/test_fp8.py tests/test_mla_decode.py -k 'fp8 and mla' -n 12" AB_TEST_LIMIT=300 \
    OUT=$OUT timeout 420 bash bench/ab.sh 0 "${VARIANTS[@]}" > "$OUT/ab_build_tests.log" 2>&1
  grep -E "BUILD|PATCH|builds|tests of" "$OUT/ab_build_tests.log" | cut -c1-150 | head -6
  grep -E "^(FAILED|ERROR)" "$OUT"/tests_compact.log 2>/dev/null | head -10
  # (the suite's tolerances would not see a one-bit change, and the patch must change none)
  nb=/tmp/ab_src_compact/$E/narrow_bitwise.py
  (cd /tmp && PYTHONPATH=/tmp/ab_base:$PYTHONPATH timeout 150 python3 -P "$nb" save /tmp/nb_base.npz &&
    PYTHONPATH=/tmp/ab_compact:$PYTHONPATH timeout 150 python3 -P "$nb" compare /tmp/nb_base.npz) \
    > "$OUT/bitwise.log" 2>&1
  grep -E "bitwise|saved|Error" "$OUT/bitwise.log" | head -8
else
  AB_REUSE=1 OUT=$OUT/ab timeout 120 bash bench/ab.sh 2 "${VARIANTS[@]}" -- --ours-step \
    --only mla_fp8_h16_b128_ctx4k > "$OUT/ab_run.log" 2>&1
  grep -E "^==|^mla" "$OUT/ab/ab.log" | cut -c1-110
  echo "timing done $(( $(date +%s) - start )) s"
  for v in base compact; do
    trace_build /tmp/ab_src_$v /tmp/trace_$v "$OUT/trace_build_$v.log" &
  done
  wait
  for v in base compact; do
    TRACE_LINES=12 TRACE_LIMIT=60 trace_run $v /tmp/trace_$v 16 128 4096 --cache=fp8
    # the query section's spans per compute warpgroup: 100 -> 101 (the block's first sequence),
    # 109 -> 101 (each later one: the previous sequence's end to this one's queries ready)
    python3 - "$REPO/tools" /tmp/tr_$v.bin <<'EOF'
import statistics, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import mla_trace_report as r
raw = np.fromfile(sys.argv[2], dtype=np.uint64).reshape(2, 3, -1)
for blk in range(2):
    roles = r.records(raw, blk)
    for wg in range(2):
        first, later, last = [], [], None
        for i, t in roles[wg]:
            if i in (100, 109):
                last = (i, t)
            elif i == 101 and last is not None:
                (first if last[0] == 100 else later).append(int(t - last[1]))
                last = None
        med = statistics.median(later) if later else float("nan")
        print(f"  block {blk} WG{wg}: 100 -> 101 {first} cycles; 109 -> 101 median {med:.0f} over {len(later)}")
EOF
  done
fi
echo "total $(( $(date +%s) - start )) s"
