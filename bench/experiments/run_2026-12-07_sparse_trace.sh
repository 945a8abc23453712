#!/usr/bin/env bash
# Session 59 (NOTES item 84 f), one call (~220 s): where sparse lists' time goes in the wide kernel.
# The fp8 mode over lists (sparse_fp8math_h128_b64_topk2048) ran 0.100 ms against the float16
# reading's 0.104 and FlashMLA's 0.088, while dense the mode is 18% faster than that reading per
# pair: so sparse pairs pay something else. The probe's timelines of kDF over lists of 2048
# (--topk=2048), the float16 reading over the same lists, and dense kDF (4096 keys) for reference:
# pair periods, the loader's gather marks (90-95) and the compute warpgroups' waits for their tiles.
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
trace_build . /tmp/trace_head "$OUT/trace_build.log" || { tail -20 "$OUT/trace_build.log"; echo "TRACE BUILD FAILED"; exit 1; }
echo "trace build: $(( $(date +%s) - start )) s"
TRACE_LINES=44 TRACE_LIMIT=60 trace_run sparse_656fp8math /tmp/trace_head 128 64 4096 --cache=656fp8math --topk=2048
TRACE_LINES=44 TRACE_LIMIT=60 trace_run sparse_656f16 /tmp/trace_head 128 64 4096 --cache=656f16 --topk=2048
TRACE_LINES=12 TRACE_LIMIT=60 trace_run 656fp8math /tmp/trace_head 128 64 4096 --cache=656fp8math
echo "total $(( $(date +%s) - start )) s"
