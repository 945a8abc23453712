#!/usr/bin/env bash
# One call on the GPU machine (the `device` tool): build, test, run the main job and/or benchmark.
#   bash bench/device_run.sh test|bench|all [extra pytest args]
# Logs and results go under $OUT; a short summary is printed last.
set -uo pipefail
MODE=${1:-all}
shift || true
REPO=$(pwd)
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

start=$(date +%s)
# Peers and test helpers travel as wheels (carry .whl): sgl-flash-mla, flash-attn3-jax, pytest-xdist.
if compgen -G "$REPO/.whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-deps --no-index --target /tmp/site "$REPO"/.whl/*.whl > "$OUT/wheels.log" 2>&1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # JAX and torch (FlashMLA) share the GPU
if ! python3 -m pip install --no-build-isolation --no-deps -v . > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1
fi
echo "build: $(( $(date +%s) - start )) s"
cd /tmp  # import the installed package, not the source tree
python3 -c "import jax, jaxpaged; print('jax', jax.__version__, jax.devices(), 'gpu handlers:', jaxpaged.gpu_platform)"

status=0
if [[ $MODE == test || $MODE == all ]]; then
  python3 -m pytest -q -p no:cacheprovider "$REPO/tests" "$@" > "$OUT/tests.log" 2>&1 || status=1
  grep -E "passed|failed|error" "$OUT/tests.log" | tail -3
  [[ $status == 0 ]] || grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -20
  python3 -m jaxpaged 2>&1 | tee "$OUT/main_job.log" || status=1
fi
if [[ $MODE == sanitize ]]; then
  # Out-of-bounds and race checks on the cases with junk tables, padding and splits.
  compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider -x \
    "$REPO/tests/test_paged_attention.py" "$REPO/tests/test_mla_decode.py" -k "ragged or corrupt or splits or layouts" \
    > "$OUT/memcheck.log" 2>&1 || status=1
  grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log" | tail -3
fi
if [[ $MODE == bench || $MODE == all ]]; then
  python3 "$REPO/bench/bench.py" --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.log" || status=1
fi
echo "total: $(( $(date +%s) - start )) s, status $status"
exit $status
