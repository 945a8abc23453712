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

# prebuilt_use NAME TREE DIR: a build of TREE's sources from DIR (any DIR/*.tar.xz whose .hash is
# TREE's hash, whatever its name) unpacked as /tmp/ab_NAME, if its module imports here with CUDA
# handlers; else no /tmp/ab_NAME is left and it fails (the caller then builds). Says which.
prebuilt_use() {
  local name=$1 tree=$2 dir have f x built here
  if ! dir=$(cd "$3" 2>/dev/null && pwd); then
    echo "prebuilt $name: no folder $3 (not carried?): building"
    return 1
  fi
  have=$(tree_hash "$tree")
  f=$(grep -lx "$have" "$dir"/*.hash 2>/dev/null | head -1)
  if [[ -z $f || ! -f ${f%.hash}.tar.xz ]]; then
    echo "prebuilt $name: none of tree ${have:0:12}: building"
    return 1
  fi
  x=/tmp/prebuilt_x_$name
  rm -rf "$x" "/tmp/ab_$name" && mkdir -p "$x" || return 1
  # (tar's J needs an xz program; Python's tarfile reads xz without one)
  if ! { tar -C "$x" -xJf "${f%.hash}.tar.xz" 2>/dev/null ||
         python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "${f%.hash}.tar.xz" "$x"; } ||
     ! mv "$x"/ab_* "/tmp/ab_$name"; then
    echo "prebuilt $name: $(basename "${f%.hash}") did not unpack: building"
    rm -rf "$x" "/tmp/ab_$name"
    return 1
  fi
  rm -rf "$x"
  built=$(cat "${f%.hash}.toolchain" 2>/dev/null) here=$(toolchain)
  [[ $built == "$here" ]] || echo "prebuilt $name: NOTE built with '$built', this machine has '$here'"
  if (cd /tmp && PYTHONPATH="/tmp/ab_$name" python3 -c \
      "import jaxpaged._extension as e, sys; sys.exit(e.GPU_PLATFORM != 'CUDA' or not e.GPU_TARGETS)") \
      > "/tmp/prebuilt_$name.log" 2>&1; then
    echo "prebuilt $name: used $(basename "${f%.hash}") (${have:0:12})"
    return 0
  fi
  echo "prebuilt $name: $(basename "${f%.hash}") does not import here ($(tail -1 "/tmp/prebuilt_$name.log")): building"
  rm -rf "/tmp/ab_$name"
  return 1
}
