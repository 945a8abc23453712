#!/usr/bin/env bash
# The full bench on HEAD in two calls on one warm machine: PART=1 builds (sm_90a) into /tmp/jp and
# runs bench.py --part 1/2; PART=2 reuses that build (rebuilding only if the machine is fresh) and
# runs --part 2/2. Records in $OUT/part$PART; merge here with
# `python3 bench/bench.py --out /tmp/merged --merge <the two h100.json>` (h100.json, the plot and a
# table-only RESULTS.md: copy the first two into bench/results, the table into bench/RESULTS.md).
#   run tool: command "PART=1 bash bench/experiments/run_2026-11-28_full_bench.sh", carry [".whl"]
# (ONLY="name ..." times those configs instead of the part, e.g. a part's rest after a crash)
# (PROBE=1 adds tools/dsmem_rate_probe.cu's run after the bench: see the end)
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
PART=${PART:-1}
source bench/prebuilt_lib.sh
# /tmp/jp is kept only if built from this tree (a landing between the parts builds again); else a
# carried build of it (bench/prebuild.sh's: carry .whl and its files, e.g. .prebuilt/L.tar.xz,
# .prebuilt/L.hash and .prebuilt/L.toolchain), else it is built here.
hash=$(tree_hash .)
if ! stamp_matches /tmp/jp "$hash" && ! prebuilt_use /tmp/jp "$hash" "$AB_PREBUILT"; then
  JAXPAGED_CUDA_ARCHS=90a BUILD_TIMEOUT=240 stamped_build /tmp/jp . "$hash" /tmp/build.log ||
    { tail -20 /tmp/build.log; echo "BUILD FAILED"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s"
fi
R=$(pwd)
SELECT=(--part "$PART/2")
[[ -n ${ONLY:-} ]] && read -r -a SELECT <<< "--only $ONLY"
cd /tmp
PYTHONPATH=/tmp/jp:$PYTHONPATH timeout $(( 590 - ($(date +%s) - start) )) python3 "$R/bench/bench.py" \
  --out "$OUT/part$PART" "${SELECT[@]}" > "$OUT/bench_part$PART.log" 2>&1
echo "bench rc $?"
grep -E "^(mla|sparse|decode|mixed)|copy bandwidth" "$OUT/bench_part$PART.log" | cut -c1-150
# PROBE=1 (session 47's next-session entry): then tools/dsmem_rate_probe.cu, built here (~10 s) and
# run (~10 s), its output in $OUT/dsmem_rate_probe.txt - after the bench, so it cannot disturb it.
[[ -n ${PROBE:-} ]] && dsmem_probe 120
echo "total $(( $(date +%s) - start )) s"
