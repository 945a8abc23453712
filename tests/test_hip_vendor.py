"""The ROCm side compiles (when hipcc is installed; .ci/run installs Debian's): the vendor layer
(tests/hip/vendor_check.cpp) and the HIP units of a ROCm build - the portable kernels (the source
the NVIDIA build runs with JAXPAGED_PORTABLE_KERNELS=1), the handlers, the split merge - one by one
through hipcc for gfx90a (tests/test_rocm_build.py builds and links the whole ROCm wheel). Nothing here runs on AMD hardware (there is none)."""

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

UNITS = ["tests/hip/vendor_check.cpp", "src/paged_attention/portable/launch.cu",
         "src/paged_attention/handler_gpu.cu", "src/mla_decode/portable/launch.cu",
         "src/mla_decode/handler_gpu.cu", "src/mla_sparse/handler_gpu.cu", "src/common/combine_splits.cu",
         "src/write_rows/handler_gpu.cu"]


@pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not installed")
@pytest.mark.parametrize("unit", UNITS)
def test_compiles_as_hip(tmp_path, unit):
    import jaxlib
    xla_include = os.path.join(os.path.dirname(jaxlib.__file__), "include")
    cmd = ["hipcc", "--offload-arch=gfx90a", "-std=c++17", "-x", "hip", f"-I{ROOT / 'src'}", "-isystem",
           xla_include, "-c", str(ROOT / unit), "-o", str(tmp_path / "unit.o")]
    # Without HIP_PLATFORM=amd, hipcc hands the file to nvcc when that is on the PATH.
    done = subprocess.run(cmd, env={**os.environ, "HIP_PLATFORM": "amd"}, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "unit.o").stat().st_size > 0
