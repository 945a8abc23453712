#!/usr/bin/env bash
# A/B timing of kernel variants in one call on the GPU machine (the `device` tool).
#   bash bench/ab.sh ROUNDS NAME=SRC_DIR... -- [bench.py args, e.g. --only mla_h128_b64_ctx4k]
# Each SRC_DIR is a source tree (the working tree ".", or one exported beside it, e.g.
#   mkdir -p abtmp/base && git archive HEAD | tar -x -C abtmp/base   # and carry "abtmp"),
# or patch:FILE[+FILE...]: the working tree with those patches applied (`patch -p1`, in order;
# e.g. new=patch:bench/experiments/2026-11-24_paged_decode_direct.patch);
# all are built at once into their own folders, then `bench.py --ours-only` runs ROUNDS times per
# variant, variants alternating, so drift of the machine shows up as spread rather than as a gain.
# Each variant runs its own tree's bench/bench.py (the bench may change with the package).
# ROUNDS=0 only builds. AB_REUSE=1 keeps builds of the same sources from an earlier call on the
# warm machine; AB_PREBUILT=DIR takes carried builds made on another machine (bench/prebuild.sh).
set -uo pipefail
ROUNDS=$1
shift
VARIANTS=()
while [[ $# -gt 0 && $1 != -- ]]; do VARIANTS+=("$1"); shift; done
[[ ${1:-} == -- ]] && shift
OUT=${OUT:-/tmp/jaxpaged-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 JAXPAGED_CUDA_ARCHS=${JAXPAGED_CUDA_ARCHS:-90a}
start=$(date +%s)
source "$(dirname "$0")/prebuilt_lib.sh"
declare -A TREE
for v in "${VARIANTS[@]}"; do
  name=${v%%=*} src=${v#*=}
  if [[ $src == patch:* ]]; then  # a copy of the working tree with the patches applied
    src=/tmp/ab_src_$name
    patched_tree "$src" "${v#*=}" || { wait; exit 1; }
  fi
  TREE[$name]=$(cd "$src" && pwd)
  hash=$(tree_hash "$src")  # (each build is stamped with it: prebuilt_lib.sh)
  # AB_REUSE=1: keep a variant already built from the same sources by an earlier ab.sh in this
  # machine's session (e.g. `bash bench/ab.sh 0 ...` builds only; tests can run on /tmp/ab_NAME
  # before the timing); a build of other sources under that name (say base=. after a landing) is
  # built again.
  if [[ -n ${AB_REUSE:-} ]] && stamp_matches "/tmp/ab_$name" "$hash"; then
    echo "reused $name (${hash:0:12})"
    continue
  fi
  # AB_PREBUILT=DIR (carried; made here by bench/prebuild.sh): a build of these same sources from
  # DIR is unpacked instead of building, if it imports with CUDA handlers.
  [[ -n ${AB_PREBUILT:-} ]] && prebuilt_use "/tmp/ab_$name" "$hash" "$AB_PREBUILT" && continue
  echo "building $name here (${hash:0:12}; $(toolchain))"
  stamped_build "/tmp/ab_$name" "$src" "$hash" "$OUT/build_$name.log" || echo "BUILD FAILED: $name" &
done
wait
echo "builds: $(( $(date +%s) - start )) s"
cd /tmp
# AB_TEST="NAME:pytest args" (e.g. 'pv:tests/test_fp8.py -k mla -n 8'): that variant's own tests
# (paths under its tree) run on its build before any timing, under AB_TEST_LIMIT seconds (default
# 240); the log is $OUT/tests_NAME.log, its last lines printed. The timing runs either way.
if [[ -n ${AB_TEST:-} ]]; then
  tname=${AB_TEST%%:*} targs=${AB_TEST#*:}
  tree=${TREE[$tname]:?"AB_TEST names no variant: $tname"}
  eval "targv=($targs)"  # (shell words: quotes group a -k expression)
  for i in "${!targv[@]}"; do [[ ${targv[$i]} == tests/* ]] && targv[$i]="$tree/${targv[$i]}"; done
  PYTHONPATH="/tmp/ab_$tname${PYTHONPATH:+:$PYTHONPATH}" timeout "${AB_TEST_LIMIT:-240}" \
    python3 -m pytest -q -p no:cacheprovider "${targv[@]}" > "$OUT/tests_$tname.log" 2>&1
  echo "tests of $tname: rc $? - $(tail -1 "$OUT/tests_$tname.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/tests_$tname.log" | head -10
fi
for r in $(seq "$ROUNDS"); do
  for v in "${VARIANTS[@]}"; do
    name=${v%%=*}
    echo "== $name round $r" | tee -a "$OUT/ab.log"
    PYTHONPATH="/tmp/ab_$name" python3 "${TREE[$name]}/bench/bench.py" --ours-only --out "$OUT/${name}_$r" "$@" 2>&1 \
      | grep -E "^(mla|sparse|decode|mixed)|copy bandwidth|Error|error" | tee -a "$OUT/ab.log"
  done
done
# The device tool brings back at most 8 files from $OUT: the variants' build logs and per-round
# records (NAME_ROUND/) go into one archive, ab_results.tar.gz, beside ab.log (AB_KEEP=1: left as
# they are).
if [[ -z ${AB_KEEP:-} ]]; then
  (
    cd "$OUT" || exit 0
    keep=()
    for v in "${VARIANTS[@]}"; do
      name=${v%%=*}
      for f in "build_$name.log" "${name}"_[0-9]*; do [[ -e $f ]] && keep+=("$f"); done
    done
    ((${#keep[@]})) && tar -czf ab_results.tar.gz "${keep[@]}" && rm -rf "${keep[@]}"
  )
fi
echo "total: $(( $(date +%s) - start )) s"
