#!/usr/bin/env bash
# Prepared in session 56 (NOTES item 81 d), one call (carry .whl; ~250 s): where kDF's time goes.
# kDF (656-byte rows, fp8_math=True) runs 0.172 ms at h128 b64 4K against kF8's 0.110 on the
# 576-byte fp8 cache; its four P^T blocks explain ~17 us, the other ~45 us not. The probe's
# timelines of kF8 (--cache=fp8math), kDF (--cache=656fp8math: marks 83-85 after each S^T group's
# scale FMAs) and the float16 reading (--cache=656f16) on the same shape, one block's pair period
# and segments each: is the extra time in S^T's groups (64 -> 83 -> 84 -> 85 -> 66), in P^T
# (67 -> 69), in the tiles' waits (63 -> 64, 71, 75: the 656 path's bytes), or spread?
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
trace_build . /tmp/trace_head "$OUT/trace_build.log" || { tail -20 "$OUT/trace_build.log"; echo "TRACE BUILD FAILED"; exit 1; }
echo "trace build: $(( $(date +%s) - start )) s"
for c in fp8math 656fp8math 656f16; do
  TRACE_LINES=40 TRACE_LIMIT=60 trace_run $c /tmp/trace_head 128 64 4096 --cache=$c
done
echo "total $(( $(date +%s) - start )) s"
