#!/usr/bin/env bash
# One device call (session 31, NOTES item 52 b; ran, not kept): pure paged decode as partitions (a persistent split
# of every (sequence, KV head) unit's keys over the resident blocks; launch_tiles.cuh). Build, then
# side by side: tests/test_paged_parts.py (both paths) and the paged test files with
# JAXPAGED_PAGED_PARTS=1 (every decode call on partitions), test_mla_decode.py (its merge is now
# common/partition_schedule.cuh's), memcheck + racecheck of the sanitizer driver's paged cases
# with partitions forced; then an A/B in the same build: JAXPAGED_PAGED_PARTS=0 (the KV splits'
# waves) against the default (the model's choice) and =1 (partitions everywhere they fit).
#   run tool: command "bash bench/experiments/run_2026-11-26_paged_parts.sh", carry [".whl"]
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
REPO=$(pwd)
patch -p1 --quiet < bench/experiments/2026-11-26_paged_decode_parts.patch || { echo "PATCH FAILED"; exit 1; }
export JAXPAGED_CUDA_ARCHS=90a
JAXPAGED_PAGED_PARTS=1 SANITIZE_TOOLS="memcheck racecheck" SANITIZE_ARGS=--paged-only SANITIZE_LIMIT=${SANITIZE_LIMIT:-220} \
  TEST_FILES=${TEST_FILES:-"tests/test_paged_parts.py tests/test_paged_attention.py tests/test_fp8.py tests/test_plan.py tests/test_sinks.py tests/test_mla_decode.py"} \
  TEST_LIMIT=${TEST_LIMIT:-230} bash bench/device_run.sh test,sanitize -n 8 2>&1 | grep -vE "^(jax|NVIDIA|name,|build:)" | tail -12
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -20
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
CFGS=${CFGS:-"decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k decode_fp8_h64_b32_ctx8k decode_b64_ctx4k"}
cd /tmp
for r in $(seq "${ROUNDS:-1}"); do
  for v in ${VARIANTS:-0 default 1}; do
    echo "== JAXPAGED_PAGED_PARTS=$v round $r"
    if [[ $v == default ]]; then unset JAXPAGED_PAGED_PARTS; else export JAXPAGED_PAGED_PARTS=$v; fi
    timeout 150 python3 "$REPO/bench/bench.py" --ours-only --out "/tmp/ab_parts_${v}_$r" --only $CFGS --ours-step 2>&1 |
      grep -E "^(decode|mla)" | tee -a "$OUT/ab_parts.log"
  done
done
unset JAXPAGED_PAGED_PARTS
rm -f "$OUT"/build.log "$OUT"/sanitize_build.log
