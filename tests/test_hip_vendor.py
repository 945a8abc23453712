"""The vendor layer compiles for ROCm: tests/hip/vendor_check.cpp through hipcc for gfx90a (when
hipcc is installed; .ci/run installs Debian's)."""

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not installed")
def test_vendor_layer_compiles_as_hip(tmp_path):
    import jaxlib
    xla_include = os.path.join(os.path.dirname(jaxlib.__file__), "include")
    cmd = ["hipcc", "--offload-arch=gfx90a", "-std=c++17", f"-I{ROOT / 'src'}", "-isystem", xla_include,
           "-c", str(ROOT / "tests" / "hip" / "vendor_check.cpp"), "-o", str(tmp_path / "check.o")]
    # Without HIP_PLATFORM=amd, hipcc hands the file to nvcc when that is on the PATH.
    done = subprocess.run(cmd, env={**os.environ, "HIP_PLATFORM": "amd"}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "check.o").stat().st_size > 0
