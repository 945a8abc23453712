"""The ROCm build (issue 19): `pip wheel . -C cmake.define.JAXPAGED_ROCM=ON` compiles the HIP units
with hipcc for gfx90a (when hipcc is installed; .ci/run installs Debian's) and links them with the
HIP runtime. The resulting package imports on this GPU-less machine, registers its handlers for XLA
platform "ROCM" (paged attention and MLA decode through the portable kernels, the row writes, the
plan ops, whose plans are zeros there),
lowers the ops for "rocm" to their custom calls and refuses there what has no kernel (fp8 MLA
caches) with a clear error.
Nothing here runs on AMD hardware (there is none)."""

import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

CHECK = r"""
import jax, jax.numpy as jnp, numpy as np, jaxpaged
from jaxpaged import _extension, _inputs
assert jaxpaged.gpu_platform == "ROCM", jaxpaged.gpu_platform
assert _extension.GPU_TARGETS == {"jaxpaged_paged_attention", "jaxpaged_mla_decode", "jaxpaged_mla_decode_sparse",
                                  "jaxpaged_write_rows", "jaxpaged_mla_decode_plan", "jaxpaged_paged_attention_plan"}, \
    _extension.GPU_TARGETS
rocm = dict(lowering_platforms=("rocm",))
rng = np.random.default_rng(0)
args = _inputs.paged_inputs(rng, q_lens=[1, 1], kv_lens=[30, 50], num_q_heads=4, num_kv_heads=2, head_dim=64,
                            page_size=16, dtype=jnp.bfloat16, decode=True)[:5]
hlo = jax.jit(jaxpaged.paged_attention).trace(*args).lower(**rocm).as_text()
assert "jaxpaged_paged_attention" in hlo
paged_plan = jax.jit(lambda lens, table: jaxpaged.paged_attention_plan(lens, table, num_q_heads=4, num_kv_heads=2,
                                                                       page_size=16))
assert "jaxpaged_paged_attention_plan" in paged_plan.trace(*args[3:5]).lower(**rocm).as_text()
mla = _inputs.mla_inputs(rng, kv_lens=np.array([30, 50]), s_q=1, num_heads=16, page_size=16, dtype=jnp.bfloat16,
                         combined=True)
hlo = jax.jit(lambda *a: jaxpaged.mla_decode(*a, scale=0.1)).trace(*mla).lower(**rocm).as_text()
assert "jaxpaged_mla_decode" in hlo
plan = jax.jit(lambda lens, table: jaxpaged.mla_decode_plan(lens, table, num_heads=16, page_size=16))
assert "jaxpaged_mla_decode_plan" in plan.trace(*mla[4:6]).lower(**rocm).as_text()
q_nope, q_pe, ckv = mla[:3]
idx = jnp.zeros((2, 1, 8), jnp.int32)
sparse = jax.jit(lambda *a: jaxpaged.mla_decode_sparse(*a, scale=0.1))
assert "jaxpaged_mla_decode_sparse" in sparse.trace(q_nope, q_pe, ckv, None, idx).lower(**rocm).as_text()
assert "jaxpaged_mla_decode_sparse" in sparse.trace(q_nope, q_pe, ckv.astype(jnp.float8_e4m3fn), None,
                                                    idx).lower(**rocm).as_text()
out = jaxpaged.paged_attention(*args)  # the CPU handlers are all there
assert np.isfinite(np.asarray(out, np.float32)).all()
print("rocm build ok")
"""


@pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not installed")
def test_rocm_build_compiles_links_and_registers(tmp_path):
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    env.pop("JAXPAGED_CUDA", None)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(ROOT),
         "-C", "cmake.define.JAXPAGED_ROCM=ON", "-C", f"build-dir={tmp_path / 'build'}"],
        env=env, capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, (build.stdout + build.stderr)[-4000:]
    wheel, = (tmp_path / "dist").glob("jaxpaged-*.whl")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp_path / "site")
        assert any(n.startswith("jaxpaged/_jaxpaged") for n in z.namelist())
    check = subprocess.run([sys.executable, "-P", "-c", CHECK], cwd=tmp_path,
                           env={**env, "PYTHONPATH": str(tmp_path / "site")}, capture_output=True, text=True,
                           timeout=600)
    assert check.returncode == 0 and "rocm build ok" in check.stdout, (check.stdout + check.stderr)[-4000:]
