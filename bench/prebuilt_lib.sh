# Sourced by bench/ab.sh (on the GPU machine) and bench/prebuild.sh (here): builds made on this
# machine ahead of a device session, carried as DIR/NAME.tar.xz (a folder ab_NAME: pip's --target)
# with DIR/NAME.hash, the tree hash of the sources it was built from, by which it is found, and
# DIR/NAME.toolchain, the nvcc and targets it was built with (a difference is reported, not refused:
# an A/B of a carried build against one built there then compares compilers too).

# patched_tree TREE patch:FILE[+FILE...]: TREE made afresh as a copy of the working tree (the current
# directory; carried and build folders left out) with the patches applied in order (patch -p1, no
# .orig backups where a hunk needs an offset or fuzz), then TREE/.ab_tree_ready written.
patched_tree() {
  local tree=$1 pf patches
  rm -rf "$tree" && mkdir -p "$tree" || return 1
  tar --exclude=./abtmp --exclude=./.whl --exclude=./.whlmin --exclude=./.prebuilt --exclude=./build \
    --exclude=./.git -cf - . | tar -xf - -C "$tree"
  IFS=+ read -ra patches <<< "${2#patch:}"
  for pf in "${patches[@]}"; do
    patch -d "$tree" -p1 --quiet --no-backup-if-mismatch < "$pf" || { echo "PATCH FAILED: $tree ($pf)"; return 1; }
  done
  touch "$tree/.ab_tree_ready"
}

# tree_hash TREE: one sha256 over the files a build reads (src/, jaxpaged/, CMakeLists.txt,
# pyproject.toml; path and content of each; bytecode and patch(1)'s .orig / .rej left out).
tree_hash() {
  (cd "$1" && find src jaxpaged CMakeLists.txt pyproject.toml -type f ! -name '*.pyc' ! -name '*.orig' \
    ! -name '*.rej' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-64)
}

# toolchain: the compiler and targets a build's code depends on beyond its sources (one line).
toolchain() {
  echo "$(nvcc --version 2>/dev/null | tail -1); archs ${JAXPAGED_CUDA_ARCHS:-90a}"
}

# A build folder (pip's --target) is stamped with the hash of the tree it was built from
# (DEST/.tree_hash). stamp_matches DEST HASH: DEST holds a build stamped HASH.
stamp_matches() {
  [[ -d $1/jaxpaged && $(cat "$1/.tree_hash" 2>/dev/null) == "$2" ]]
}

# stamped_build DEST TREE HASH LOG: TREE built into DEST afresh (pip's --target leaves an existing
# package folder in place, so the old one goes first) by BUILD_PY (default python3), within
# BUILD_TIMEOUT seconds (default none), its output in LOG; stamped HASH if it succeeds.
stamped_build() {
  rm -rf "$1"
  timeout "${BUILD_TIMEOUT:-0}" "${BUILD_PY:-python3}" -m pip install --no-build-isolation --no-deps --target "$1" "$2" \
    > "$4" 2>&1 && echo "$3" > "$1/.tree_hash"
}

# prebuilt_use DEST HASH DIR: a build of the sources of tree hash HASH from DIR (any DIR/*.tar.xz
# whose .hash is HASH, whatever its name) unpacked as DEST and stamped, if its module imports
# here with CUDA handlers; else no DEST is left and it fails (the caller then builds). Says which.
prebuilt_use() {
  local dest=$1 have=$2 dir f x built here name=${1##*/}
  name=${name#ab_}
  if ! dir=$(cd "$3" 2>/dev/null && pwd); then
    echo "prebuilt $name: no folder $3 (not carried?): building"
    return 1
  fi
  f=$(grep -lx "$have" "$dir"/*.hash 2>/dev/null | head -1)
  if [[ -z $f || ! -f ${f%.hash}.tar.xz ]]; then
    echo "prebuilt $name: none of tree ${have:0:12}: building"
    return 1
  fi
  x=$dest.unpack
  rm -rf "$x" "$dest" && mkdir -p "$x" || return 1
  # (tar's J needs an xz program; Python's tarfile reads xz without one)
  if ! { tar -C "$x" -xJf "${f%.hash}.tar.xz" 2>/dev/null ||
         python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "${f%.hash}.tar.xz" "$x"; } ||
     ! mv "$x"/ab_* "$dest"; then
    echo "prebuilt $name: $(basename "${f%.hash}") did not unpack: building"
    rm -rf "$x" "$dest"
    return 1
  fi
  rm -rf "$x"
  built=$(cat "${f%.hash}.toolchain" 2>/dev/null) here=$(toolchain)
  [[ $built == "$here" ]] || echo "prebuilt $name: NOTE built with '$built', this machine has '$here'"
  if (cd /tmp && PYTHONPATH="$dest" python3 -c \
      "import jaxpaged._extension as e, sys; sys.exit(e.GPU_PLATFORM != 'CUDA' or not e.GPU_TARGETS)") \
      > "$dest.import.log" 2>&1; then
    echo "$have" > "$dest/.tree_hash"
    echo "prebuilt $name: used $(basename "${f%.hash}") (${have:0:12})"
    return 0
  fi
  echo "prebuilt $name: $(basename "${f%.hash}") does not import here ($(tail -1 "$dest.import.log")): building"
  rm -rf "$dest"
  return 1
}
