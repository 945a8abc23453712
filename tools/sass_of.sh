#!/usr/bin/env bash
# SASS of one CUDA unit for sm_90a (or $ARCH), without a GPU: nvcc -cubin, then nvdisasm.
#   bash tools/sass_of.sh src/mla_decode/sm90/fp8_narrow.cu > /tmp/unit.sass
# This machine's toolkit has no nvdisasm; PyPI's `nvidia-cuda-nvdisasm` wheel carries one:
#   python3 -m pip download --no-deps -d /tmp/nvd nvidia-cuda-nvdisasm &&
#   (cd /tmp/nvd && python3 -m zipfile -e nvidia_cuda_nvdisasm-*.whl x && chmod +x x/nvidia/cu13/bin/nvdisasm)
# then NVDISASM=/tmp/nvd/x/nvidia/cu13/bin/nvdisasm (or nvdisasm on PATH). Spills show as
# STL / LDL with "SpillRefill"; count a loop's instructions between its label and back-branch.
set -euo pipefail
unit=$1
arch=${ARCH:-90a}
tool=${NVDISASM:-$(command -v nvdisasm || echo /tmp/nvd/x/nvidia/cu13/bin/nvdisasm)}
inc=$(python3 -c "import jax.ffi; print(jax.ffi.include_dir())")
out=$(mktemp --suffix=.cubin)
nvcc -std=c++17 -O3 -gencode=arch=compute_$arch,code=sm_$arch -I src -I "$inc" -cubin -o "$out" "$unit"
"$tool" -c "$out"
rm -f "$out"
