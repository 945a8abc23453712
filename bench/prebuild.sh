#!/usr/bin/env bash
# Builds, on this machine (no GPU needed; nvcc is), the variants a device call would otherwise
# build there, so the call spends its time on tests and timing instead (~1-4 min of device time
# a call: bench/ab.sh builds two or three variants in ~100-260 s there).
#   bash bench/prebuild.sh NAME=SRC...    (SRC as bench/ab.sh takes it: . or patch:FILE[+FILE...])
# For each variant: its tree as ab.sh makes it, built for sm_90a with PY (default /tmp/py312/bin/python:
# the GPU machine's Python minor (3.12) and jax (0.11.2), e.g. `python3.12 -m venv /tmp/py312 &&
# /tmp/py312/bin/pip install jax==0.11.2 jaxlib==0.11.2 nanobind scikit-build-core cmake ninja`),
# packed into PREBUILT (default .prebuilt, git-ignored: `echo /.prebuilt/ >> .git/info/exclude`) as
# NAME.tar.xz (~6.5 MB) + NAME.toolchain + NAME.hash. A variant whose NAME.hash is its tree's is
# skipped.
# On the device: carry .prebuilt and run ab.sh with AB_PREBUILT=.prebuilt; a variant whose tree
# differs from the one it was built from, or whose module does not import there, is built there
# as before. Carry .whlmin (pytest-xdist, execnet) instead of .whl where no peer runs: .whl's
# 32 MB and eight prebuilt variants (~49 MB) do not fit the 64 MiB a call carries together.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/prebuilt_lib.sh
PY=${PY:-/tmp/py312/bin/python}
PREBUILT=${PREBUILT:-.prebuilt}
WORK=${PREBUILT_WORK:-/tmp/prebuild}
mkdir -p "$PREBUILT" "$WORK"
export JAXPAGED_CUDA_ARCHS=90a CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
for v in "$@"; do
  name=${v%%=*} src=${v#*=}
  if [[ $src == patch:* ]]; then
    src=$WORK/src_$name
    patched_tree "$src" "${v#*=}" || exit 1
  fi
  h=$(tree_hash "$src")
  if [[ -f $PREBUILT/$name.tar.xz && $(cat "$PREBUILT/$name.hash" 2>/dev/null) == "$h" ]]; then
    echo "$name: up to date (${h:0:12})"
    continue
  fi
  t0=$(date +%s)
  if ! BUILD_PY=$PY stamped_build "$WORK/ab_$name" "$src" "$h" "$WORK/build_$name.log"; then
    echo "$name: BUILD FAILED (log $WORK/build_$name.log)"
    exit 1
  fi
  find "$WORK/ab_$name" -name __pycache__ -prune -exec rm -rf {} +
  # (the hash last: an archive cut short is never found)
  rm -f "$PREBUILT/$name.hash"
  tar -C "$WORK" -cf - "ab_$name" | xz -T0 -6 > "$PREBUILT/$name.tar.xz.tmp" &&
    mv "$PREBUILT/$name.tar.xz.tmp" "$PREBUILT/$name.tar.xz" && toolchain > "$PREBUILT/$name.toolchain" &&
    echo "$h" > "$PREBUILT/$name.hash" || { echo "$name: PACKING FAILED"; exit 1; }
  echo "$name: built in $(( $(date +%s) - t0 )) s, $(du -h "$PREBUILT/$name.tar.xz" | cut -f1) (${h:0:12})"
done
du -ch "$PREBUILT"/*.tar.xz | tail -1
