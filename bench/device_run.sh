#!/usr/bin/env bash
# One call on the GPU machine (the `device` tool): build, then any of: test (+ the main job),
# bench, serving (bench/serving_ops.py), sanitize (tools/sanitize_driver.cu under compute-sanitizer),
# profile (ncu of one bench config, ours and FlashMLA: see the profile block below).
#   bash bench/device_run.sh test|bench|serving|sanitize|profile|all|MODE,MODE,.. [extra pytest args]
# BENCH_ARGS: extra bench.py arguments (e.g. "--only decode_b64_ctx4k"); BENCH_PARTS=2: the full
# bench as two parts in this one call, merged here (logs bench_part{1,2}.log); SANITIZE_TOOLS: which
# tools (default "memcheck racecheck synccheck initcheck"; SANITIZE_ARGS: driver flags, e.g.
# --mla-only or --paged-only; "memcheck_portable" runs memcheck with
# JAXPAGED_PORTABLE_KERNELS=1). The sanitizer's build starts in the background at once; its tools
# then run side by side (each under SANITIZE_LIMIT seconds, default 480), beside the tests, and the
# bench waits for them so that nothing else runs on the GPU while it times.
# JAXPAGED_PORTABLE_KERNELS=1 in the environment runs the portable paged kernel instead of the
# tile kernel (tests, bench and the sanitizer driver alike).
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
has() { [[ $MODE == all || ,$MODE, == *,$1,* ]]; }
san=/tmp/jaxpaged-sanitize  # (built from the source tree, beside the package build)
if has sanitize && [[ $MODE != all ]]; then
  # The kernels without JAX, built with the sanitizer driver (in the background: it overlaps the rest).
  ( cmake -S "$REPO" -B "$san" -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_SANITIZE_DRIVER=ON \
      -DJAXPAGED_CUDA_ARCHS="${JAXPAGED_CUDA_ARCHS:-90a}" > "$OUT/sanitize_build.log" 2>&1 &&
    nice ninja -C "$san" jaxpaged_sanitize >> "$OUT/sanitize_build.log" 2>&1; echo $? > "$san.rc" ) &
  san_pid=$!
fi

# Peers and test helpers travel as wheels (carry .whl): sgl-flash-mla, flash-attn3-jax, pytest-xdist.
if compgen -G "$REPO/.whl/*.whl" > /dev/null; then
  # (its log outside $OUT: the device tool returns only a few files, the ones that matter go there)
  python3 -m pip install -q --no-deps --no-index --target /tmp/site "$REPO"/.whl/*.whl > /tmp/wheels.log 2>&1
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
san_tools=()
if [[ -n ${san_pid:-} ]]; then
  wait "$san_pid"
  if [[ $(cat "$san.rc") == 0 ]]; then
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
      (
        env=(); t=$tool
        [[ $tool == *_portable ]] && env=(JAXPAGED_PORTABLE_KERNELS=1) && t=${tool%_portable}
        quick=$([[ $t == racecheck || $t == initcheck ]] && echo --quick)
        env "${env[@]}" timeout "${SANITIZE_LIMIT:-480}" compute-sanitizer --tool $t --error-exitcode 9 \
          "$san/jaxpaged_sanitize" $quick ${SANITIZE_ARGS:-} > "$OUT/sanitize_$tool.log" 2>&1
        echo $? > "$san.$tool.rc"
      ) &
      san_tools+=("$tool:$!")
    done
  else
    tail -20 "$OUT/sanitize_build.log"; echo "SANITIZE DRIVER BUILD FAILED"; status=1
  fi
fi
wait_sanitizers() {
  for entry in "${san_tools[@]}"; do
    local tool=${entry%%:*}; wait "${entry#*:}"
    local rc; rc=$(cat "$san.$tool.rc")
    [[ $rc == 0 ]] || status=1
    echo "$tool: rc $rc, $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitize_$tool.log" | tail -1), $(tail -1 "$OUT/sanitize_$tool.log")"
  done
  san_tools=()
}

if has test; then
  # TEST_FILES (paths under the repo) narrows the run: the whole suite no longer fits one 600 s
  # device call (session 10); e.g. TEST_FILES="tests/test_mla_decode.py tests/test_adversarial.py"
  # in one call and the rest (TEST_EXCLUDE_SLOW=1) in another.
  files=("$REPO/tests")
  if [[ -n ${TEST_FILES:-} ]]; then files=(); for f in $TEST_FILES; do files+=("$REPO/$f"); done; fi
  pyargs=("$@")
  if [[ -n ${TEST_EXCLUDE_SLOW:-} ]]; then
    pyargs+=(--ignore="$REPO/tests/test_mla_decode.py" --ignore="$REPO/tests/test_adversarial.py")
  fi
  # TEST_DESELECT: a file (under the repo) of node ids "tests/test_x.py::name[params]", one per line,
  # to leave out - e.g. those an earlier cut-off call already ran (its -v -v log names them). Node
  # ids to select would not do: with pytest-xdist one id that does not exist empties the run.
  if [[ -n ${TEST_DESELECT:-} ]]; then
    while IFS= read -r id; do [[ -n $id ]] && pyargs+=("--deselect=$id"); done < "$REPO/$TEST_DESELECT"
  fi
  # TEST_PORTABLE=1: the tests run the portable kernels (JAXPAGED_PORTABLE_KERNELS=1), the rest does
  # not; TEST_LIMIT: seconds before pytest is stopped (its log keeps what ran; -v names each test).
  tenv=(); [[ -n ${TEST_PORTABLE:-} ]] && tenv=(JAXPAGED_PORTABLE_KERNELS=1)
  env "${tenv[@]}" timeout "${TEST_LIMIT:-0}" python3 -m pytest -q -p no:cacheprovider -p no:benchmark \
    "${files[@]}" "${pyargs[@]}" > "$OUT/tests.log" 2>&1 || status=1
  grep -E "passed|failed|error" "$OUT/tests.log" | tail -3
  [[ $status == 0 ]] || grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -20
  python3 -m jaxpaged 2>&1 | tee "$OUT/main_job.log" || status=1
fi
if has bench; then
  wait_sanitizers
  if [[ ${BENCH_PARTS:-1} -gt 1 ]]; then
    # The full run in one call (about 480 s with a 90a build): each part's records outside $OUT
    # (the device tool returns only a few files, and a lost part's records cost a call in session
    # 26), merged into $OUT's RESULTS.md / <gpu>.json / plot; the parts' logs stay under $OUT.
    parts=()
    for ((k = 1; k <= BENCH_PARTS; k++)); do
      python3 "$REPO/bench/bench.py" --out "/tmp/bench_part$k" --part "$k/$BENCH_PARTS" ${BENCH_ARGS:-} \
        > "$OUT/bench_part$k.log" 2>&1 || status=1
      tail -3 "$OUT/bench_part$k.log"
      for f in /tmp/bench_part$k/*.json; do [[ $f == *_ours.json ]] || parts+=("$f"); done
    done
    python3 "$REPO/bench/bench.py" --out "$OUT" --merge "${parts[@]}" 2>&1 | tail -3 || status=1
  else
    python3 "$REPO/bench/bench.py" --out "$OUT" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" || status=1
  fi
fi
if has profile && [[ $MODE != all ]]; then
  # ncu --set full of one bench config's kernels (PROFILE_CONFIG, default mla_h128_b4_ctx4k): ours
  # with a plan made once, then FlashMLA on the same inputs (bench/profile_one.py); the first
  # PROFILE_COUNT kernels whose names match PROFILE_KERNELS. Pages exported as text under $OUT.
  wait_sanitizers
  pcfg=${PROFILE_CONFIG:-mla_h128_b4_ctx4k}
  timeout "${PROFILE_LIMIT:-420}" ncu --set full --import-source yes -k "regex:${PROFILE_KERNELS:-mla}" \
    -c "${PROFILE_COUNT:-12}" -f -o "$OUT/profile" python3 "$REPO/bench/profile_one.py" "$pcfg" --plan \
    --flashmla ${PROFILE_ARGS:-} > "$OUT/profile_run.log" 2>&1 || status=1
  if [[ -f $OUT/profile.ncu-rep ]]; then
    ncu -i "$OUT/profile.ncu-rep" --page details > "$OUT/profile_details.txt" 2>&1
    ncu -i "$OUT/profile.ncu-rep" --page raw --csv > "$OUT/profile_raw.csv" 2>&1
    grep -E "^  [^ ].*\(|Duration|Registers Per Thread|Achieved Occupancy" "$OUT/profile_details.txt" | head -80
    # Source level (SASS) of the attention kernels, ours and FlashMLA's: the top lines by stall
    # samples and by instructions executed (tools/ncu_top_lines.py), a few KB each under $OUT.
    for k in ${PROFILE_SOURCE_KERNELS:-mla_wgmma_kernel flash_fwd_splitkv_mla_kernel mla_merge_pieces flash_fwd_mla_combine}; do
      ncu -i "$OUT/profile.ncu-rep" --page source --csv --print-source sass -k "regex:$k" -c 1 \
        > "/tmp/profile_source_$k.csv" 2> "/tmp/profile_source_$k.err" &&
        python3 "$REPO/tools/ncu_top_lines.py" "/tmp/profile_source_$k.csv" 40 > "$OUT/profile_source_$k.txt" 2>&1 ||
        { echo "source page of $k: not exported"; tail -3 "/tmp/profile_source_$k.err"; }
    done
  fi
fi
if has serving; then
  python3 "$REPO/bench/serving_ops.py" --out "$OUT" 2>&1 | tee "$OUT/serving_ops.log" || status=1
fi
wait_sanitizers
# The summary last (a caller's `tail` keeps it): the tests' result line, then the time.
[[ -f $OUT/tests.log ]] && echo "tests: $(grep -E "passed|failed|error" "$OUT/tests.log" | tail -1)"
echo "total: $(( $(date +%s) - start )) s, status $status"
exit $status
