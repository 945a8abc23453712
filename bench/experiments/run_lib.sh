# Sourced by the run scripts here (after their `set -uo pipefail`): $OUT made, $start set, $E the
# experiments folder; use_peers installs the carried wheels (.whl: sgl-flash-mla, flash-attn3-jax,
# pytest-xdist; or, where no peer runs, .whlmin: pytest-xdist and execnet alone) into /tmp/site,
# puts them on PYTHONPATH and tells JAX not to take the whole GPU (torch shares it). bench/ab.sh
# takes carried prebuilt variants from .prebuilt (bench/prebuild.sh) where they match.
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
start=$(date +%s)
E=bench/experiments
REPO=$(pwd)  # (the scripts source this file from the repository's root)
export AB_PREBUILT=${AB_PREBUILT:-.prebuilt}
use_peers() {
  local w=.whl
  [[ -d .whl ]] || w=.whlmin
  python3 -m pip install -q --no-deps --no-index --target /tmp/site $w/*.whl > /tmp/wheels.log 2>&1
  export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
}

# ctx_scan NAME...: mla_ctx_scan.py on each build /tmp/ab_NAME (bench/ab.sh's), each under
# CTX_SCAN_LIMIT seconds (default 120): its lines in $OUT/ctx_scan_NAME.log, the fits printed.
ctx_scan() {
  local repo v
  repo=$(pwd)
  for v in "$@"; do
    echo "== ctx scan, $v"
    (cd /tmp && PYTHONPATH=/tmp/ab_$v:/tmp/site timeout "${CTX_SCAN_LIMIT:-120}" \
      python3 "$repo/$E/mla_ctx_scan.py" 2>&1) | grep -E "^(mla|fit|  )" > "$OUT/ctx_scan_$v.log"
    grep -E "^(fit|  )" "$OUT/ctx_scan_$v.log"
  done
}

# build_into DIR: the package built for sm_90a into DIR (log $OUT/build.log; exits the script on a
# failed build), then R = the repository, the working directory /tmp and DIR first on PYTHONPATH.
build_into() {
  JAXPAGED_CUDA_ARCHS=90a timeout 300 python3 -m pip install --no-build-isolation --no-deps --target "$1" . \
    > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s"
  R=$(pwd)
  cd /tmp || exit 1
  export PYTHONPATH=$1:$PYTHONPATH
}

# tests_of_build LIMIT K FILE...: pytest -n TESTS_N (default 8) -v -k K of the named test files of
# the repository (R) against the build_into build, within LIMIT s (log $OUT/tests.log: -v names
# each case that finished, so a cut run says which ran); its last line and failures.
tests_of_build() {
  local limit=$1 k=$2 f files=()
  shift 2
  for f in "$@"; do files+=("$R/tests/$f"); done
  timeout "$limit" python3 -m pytest -v -p no:cacheprovider -n "${TESTS_N:-8}" "${files[@]}" -k "$k" > "$OUT/tests.log" 2>&1
  echo "tests: rc $? - $(tail -1 "$OUT/tests.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -8
}

# split_sweep LIMIT "COUNT..." CONFIG...: bench.py --ours-only --ours-step of the configs (build_into's
# build, with 2026-11-29_paged_kv_splits_env.patch applied) once per split count - "default" = the
# launcher's choice, n = JAXPAGED_KV_SPLITS=n - each run within LIMIT s; lines appended to
# $OUT/split_sweep.log and printed.
split_sweep() {
  local limit=$1 counts=$2 n
  shift 2
  for n in $counts; do
    echo "== splits $n" | tee -a "$OUT/split_sweep.log"
    env $([[ $n != default ]] && echo JAXPAGED_KV_SPLITS=$n) timeout "$limit" python3 "$R/bench/bench.py" --ours-only \
      --ours-step --only "$@" 2>&1 | grep -E "^decode|Error" | cut -c1-110 | tee -a "$OUT/split_sweep.log"
  done
}

# build_patched DIR PATCH...: the tree with $E/PATCH... applied in turn (exits the script on one
# that fails), then build_into DIR.
build_patched() {
  local dir=$1 pf
  shift
  for pf in "$@"; do
    patch -p1 --quiet < "$E/$pf" || { echo "PATCH FAILED: $pf"; exit 1; }
  done
  build_into "$dir"
}

# variant_tests NAME FILE...: pytest -n 8 -x of the named test files of bench/ab.sh's variant NAME
# (its tree /tmp/ab_src_NAME, its build /tmp/ab_NAME), in the time left of the call's 590 s; the
# log in $OUT/tests_NAME.log, its last line printed.
variant_tests() {
  local name=$1 f files=()
  shift
  for f in "$@"; do files+=("/tmp/ab_src_$name/tests/$f"); done
  (cd /tmp && PYTHONPATH=/tmp/ab_$name:/tmp/site timeout $(( 590 - ($(date +%s) - start) )) \
    python3 -m pytest -q -p no:cacheprovider -n 8 -x "${files[@]}" > "$OUT/tests_$name.log" 2>&1)
  echo "tests of $name: rc $? - $(tail -1 "$OUT/tests_$name.log")"
}

# sparse_ab_timing NAME PATCH LIMIT: bench/ab.sh's base against the working tree with PATCH, NAME's
# test_mla_sparse.py first, then 2 rounds of the four FlashMLA-compared sparse configs per call and
# per layer, all under LIMIT seconds (logs in $OUT/ab_run.log and $OUT/ab/); its lines printed.
sparse_ab_timing() {
  local name=$1 patch=$2 limit=$3
  AB_TEST="$name:tests/test_mla_sparse.py -n 8 -x" AB_TEST_LIMIT=150 OUT=$OUT/ab timeout "$limit" bash bench/ab.sh 2 \
    base=. "$name=patch:$patch" -- --ours-step --only sparse_h128_b64_topk2048 sparse_h64_b64_topk2048 \
    sparse_h128_sq2_b32_topk2048 sparse_h128_b128_topk2048 > "$OUT/ab_run.log" 2>&1
  grep -E "builds|FAILED|tests of" "$OUT/ab_run.log"
  grep -E "^==|^sparse" "$OUT/ab/ab.log" | cut -c1-150
  echo "timing done $(( $(date +%s) - start )) s"
}

# sparse_ab NAME PATCH: base against the working tree with PATCH (bench/ab.sh): NAME's sparse MLA
# tests first, 2 rounds of the four FlashMLA-compared sparse configs per call and per layer, then
# memcheck of NAME's MLA driver cases if 120 s of the call's 585 are left.
sparse_ab() {
  local name=$1 patch=$2
  sparse_ab_timing "$name" "$patch" 430
  if (( 585 - ($(date +%s) - start) > 120 )); then
    sanitizer_build "$name"
    memcheck_mla "$name"
  fi
  echo "total $(( $(date +%s) - start )) s"
}

# ab_round LIMIT: one round of bench/ab.sh on the caller's $VARIANTS (built before: AB_REUSE) and
# $CONFIGS, per call and per layer, under LIMIT seconds; its lines printed, the round's records
# removed (a later round names them again).
ab_round() {
  # shellcheck disable=SC2086
  AB_REUSE=1 OUT=$OUT/ab timeout "$1" bash bench/ab.sh 1 $VARIANTS -- --ours-step --only $CONFIGS \
    > "$OUT/ab_run.log" 2>&1
  grep -E "^==|^(mla|sparse)" "$OUT/ab/ab.log" | cut -c1-120
  rm -rf "$OUT"/ab/*_1
  echo "round done $(( $(date +%s) - start )) s"
}

# sanitizer_build NAME: the sanitizer driver of bench/ab.sh's tree /tmp/ab_src_NAME into /tmp/san_NAME,
# in the background (san_pid); memcheck_mla NAME: memcheck of its MLA cases in the call's time left.
sanitizer_build() {
  (cmake -S /tmp/ab_src_$1 -B /tmp/san_$1 -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_SANITIZE_DRIVER=ON \
     -DJAXPAGED_CUDA_ARCHS=90a > /tmp/san_build.log 2>&1 && nice ninja -C /tmp/san_$1 jaxpaged_sanitize \
     >> /tmp/san_build.log 2>&1; echo "sanitizer build rc $?") &
  san_pid=$!
}
memcheck_mla() {
  wait $san_pid
  sanitize_mla memcheck "$1"
}
# sanitize_mla TOOL NAME [END]: compute-sanitizer TOOL (memcheck, synccheck, ...) of /tmp/san_NAME's
# MLA cases until END seconds of the call (default 585); log $OUT/TOOL_NAME.log, its summary printed.
sanitize_mla() {
  timeout $(( ${3:-585} - ($(date +%s) - start) )) compute-sanitizer --tool "$1" --error-exitcode 9 \
    /tmp/san_$2/jaxpaged_sanitize --mla-only > "$OUT/$1_$2.log" 2>&1
  echo "$1 of $2: rc $? $(grep 'ERROR SUMMARY' "$OUT/$1_$2.log" | tail -1) | $(tail -1 "$OUT/$1_$2.log")"
}

# build_with_sanitizer NAME VARIANT...: bench/ab.sh 0 builds the variants (NAME=SRC as ab.sh takes
# them; log $OUT/ab_build.log) while NAME's sanitizer driver is built beside them (sanitizer_build).
build_with_sanitizer() {
  local name=$1 ab_pid
  shift
  rm -f "/tmp/ab_src_$name/.ab_tree_ready"
  OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 "$@" > "$OUT/ab_build.log" 2>&1 &
  ab_pid=$!
  local i  # (until ab.sh has copied and patched NAME's tree)
  for ((i = 0; i < 120 && ! -e /tmp/ab_src_$name/.ab_tree_ready; ++i)); do sleep 0.5; done
  sanitizer_build "$name"
  wait $ab_pid
  grep -E "builds|FAILED" "$OUT/ab_build.log"
  wait $san_pid
  echo "builds done $(( $(date +%s) - start )) s"
}

# patch_ab PATCH ROUNDS LIMIT CONFIG...: HEAD (base) against HEAD + $E/PATCH (new), both built by
# bench/ab.sh with new's sanitizer driver beside (build_with_sanitizer), then ROUNDS alternating
# rounds of the configs, ours only, per call and per layer, within LIMIT s (logs $OUT/ab_run.log,
# $OUT/ab/ab.log); prints the rounds' lines.
patch_ab() {
  local variants="base=. new=patch:$E/$1" rounds=$2 limit=$3
  shift 3
  # shellcheck disable=SC2086
  build_with_sanitizer new $variants
  # shellcheck disable=SC2086
  AB_REUSE=1 OUT=$OUT/ab timeout "$limit" bash bench/ab.sh "$rounds" $variants -- --ours-step --only "$@" \
    > "$OUT/ab_run.log" 2>&1
  grep -E "^==|^decode" "$OUT/ab/ab.log" | cut -c1-100
  echo "timing done $(( $(date +%s) - start )) s"
}

# paged_sanitize_beside_tests NAME K [N FILE...]: memcheck and racecheck (--quick) of NAME's paged
# driver cases (/tmp/san_NAME) in the background, beside pytest -n N (default 6) -k K of NAME's
# test files (default test_paged_attention.py, test_fp8.py and test_plan.py), all in the call's
# time left of 585 s; then the failures and each one's summary line.
paged_sanitize_beside_tests() {
  local name=$1 k=$2 n=${3:-6} left tool quick f files=()
  shift $(( $# < 3 ? $# : 3 ))
  (( $# )) || set -- test_paged_attention.py test_fp8.py test_plan.py
  for f in "$@"; do files+=("/tmp/ab_src_$name/tests/$f"); done
  left=$(( 585 - ($(date +%s) - start) ))
  for tool in memcheck racecheck; do
    quick=$([[ $tool == racecheck ]] && echo --quick)
    (cd /tmp && timeout $left compute-sanitizer --tool $tool --error-exitcode 9 /tmp/san_$name/jaxpaged_sanitize $quick \
      --paged-only > "$OUT/sanitize_$tool.log" 2>&1) &
  done
  (cd /tmp && PYTHONPATH=/tmp/ab_$name:/tmp/site timeout $left python3 -m pytest -q -p no:cacheprovider -n "$n" \
    "${files[@]}" -k "$k" > "$OUT/tests_$name.log" 2>&1)
  echo "tests of $name: rc $? - $(tail -1 "$OUT/tests_$name.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/tests_$name.log" | head -8
  wait
  for tool in memcheck racecheck; do
    echo "$tool: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitize_$tool.log" | tail -1) | $(tail -1 "$OUT/sanitize_$tool.log")"
  done
}

# scan_variants LOG ROUNDS VARIANT[:LIMIT]...: list_free_scan.py on each build /tmp/ab_VARIANT (with
# JAXPAGED_LIST_FREE_SEQS=LIMIT where given), the variants in turn, ROUNDS times; its timing lines,
# each prefixed with the variant's name, appended to LOG (scan_table.py makes the table).
scan_variants() {
  local log=$1 rounds=$2 r v name limit
  shift 2
  for r in $(seq "$rounds"); do
    for v in "$@"; do
      name=${v%%:*} limit=$([[ $v == *:* ]] && echo "${v#*:}")
      (cd /tmp && env ${limit:+JAXPAGED_LIST_FREE_SEQS=$limit} PYTHONPATH=/tmp/ab_$name:/tmp/site timeout 60 \
        python3 "$REPO/$E/list_free_scan.py" 2>&1) | grep -E "us$|Error" | sed "s/^/$name /" >> "$log"
    done
  done
  echo "scan done $(( $(date +%s) - start )) s"
}

# dsmem_probe LIMIT: tools/dsmem_rate_probe.cu built (~10 s) and run under LIMIT seconds (~10 s), its
# output in $OUT/dsmem_rate_probe.txt and printed (R = the repository; after any timing, so it
# cannot disturb it).
dsmem_probe() {
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I "$R/src" -o /tmp/dsmem_rate_probe \
    "$R/tools/dsmem_rate_probe.cu" && timeout "$1" /tmp/dsmem_rate_probe > "$OUT/dsmem_rate_probe.txt" 2>&1
  echo "dsmem probe rc $?"
  cat "$OUT/dsmem_rate_probe.txt"
}

# ncu_paged NAME CONFIG [source]: ncu --set full of the paged tile kernel's first launch in
# bench/profile_one.py CONFIG (under the caller's environment; R = the repository, as build_into
# sets it), under 150 s: its details page appended to $OUT/profile_details.txt; with `source`, its
# top SASS lines and opcode shares in $OUT/profile_source_NAME.txt (tools/ncu_top_lines.py).
ncu_paged() {
  local name=$1 cfg=$2
  timeout 150 ncu --set full --import-source yes -k regex:paged_tile -c 1 -f -o "/tmp/prof_$name" \
    python3 "$R/bench/profile_one.py" "$cfg" > "/tmp/prof_$name.log" 2>&1
  echo "== $name: ncu rc $?"
  { echo "=== $name"; ncu -i "/tmp/prof_$name.ncu-rep" --page details 2>&1; } >> "$OUT/profile_details.txt"
  if [[ ${3:-} == source ]]; then
    ncu -i "/tmp/prof_$name.ncu-rep" --page source --csv --print-source sass > "/tmp/src_$name.csv" 2>/dev/null &&
      python3 "$R/tools/ncu_top_lines.py" "/tmp/src_$name.csv" 60 > "$OUT/profile_source_$name.txt" 2>&1
  fi
}

# ncu_kernels NAME CFG REGEX [PROFILE_ONE_ARGS...]: ncu --set full of the kernels matching REGEX (at
# most 2 launches) in one call of bench/profile_one.py CFG (e.g. with --flashmla: FlashMLA's kernel
# beside ours), under 200 s; its details page in $OUT/ncu_details_NAME.txt, time / tensor pipe /
# stall ratios in $OUT/ncu_stalls_NAME.txt (tools/ncu_stalls.py), printed. R as build_into sets it.
ncu_kernels() {
  local name=$1 cfg=$2 regex=$3
  shift 3
  timeout 200 ncu --set full -k "regex:$regex" -c 2 -f -o "/tmp/ncu_$name" \
    python3 "$R/bench/profile_one.py" "$cfg" --calls 1 "$@" > "$OUT/ncu_run_$name.log" 2>&1
  echo "ncu $name rc $? ($(( $(date +%s) - start )) s)"; tail -3 "$OUT/ncu_run_$name.log"
  ncu -i "/tmp/ncu_$name.ncu-rep" --page details > "$OUT/ncu_details_$name.txt" 2>&1
  ncu -i "/tmp/ncu_$name.ncu-rep" --page raw --csv > "/tmp/ncu_raw_$name.csv" 2>&1
  python3 "$R/tools/ncu_stalls.py" "/tmp/ncu_raw_$name.csv" > "$OUT/ncu_stalls_$name.txt"
  cut -c1-120 "$OUT/ncu_stalls_$name.txt"
}

# ncu_source NAME CFG REGEX [ROWS]: ncu's source view of the first launch matching REGEX in one call
# of bench/profile_one.py CFG, under 150 s: the SASS rows with the most stall samples (default 80)
# in $OUT/source_NAME.txt (tools/ncu_top_lines.py), its first 40 lines printed.
ncu_source() {
  local name=$1 cfg=$2 regex=$3
  timeout 150 ncu --set full --import-source yes -k "regex:$regex" -c 1 -f -o "/tmp/src_$name" \
    python3 "$R/bench/profile_one.py" "$cfg" --calls 1 > "$OUT/src_run_$name.log" 2>&1 || tail -3 "$OUT/src_run_$name.log"
  ncu -i "/tmp/src_$name.ncu-rep" --page source --csv --print-source sass > "/tmp/src_$name.csv" 2> /tmp/src_err.log
  python3 "$R/tools/ncu_top_lines.py" "/tmp/src_$name.csv" "${4:-80}" > "$OUT/source_$name.txt" 2>&1
  head -40 "$OUT/source_$name.txt" | cut -c1-160
}
