"""Random test inputs shaped like a serving stack's: shuffled pages, poisoned unused memory."""

from __future__ import annotations

import os
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxpaged import _inputs

ON_GPU = jax.default_backend() == "gpu"
# The GPU handlers run the portable kernels (src/paged_attention/portable/) when this is set to
# anything but "" or "0" (src/common/gpu_launch.h reads the same variable): the exact-NaN paged path.
PORTABLE = os.environ.get("JAXPAGED_PORTABLE_KERNELS", "") not in ("", "0")
# The Hopper kernels run (MLA's wgmma and narrow fp8 kernels, the device-made schedule).
HOPPER = ON_GPU and not PORTABLE and getattr(jax.devices()[0], "compute_capability", "") == "9.0"
# 16-bit floats everywhere; float32 only where it is supported (the CPU handlers).
DTYPES = ["bfloat16", "float16"] + ([] if ON_GPU else ["float32"])
# Values that must never reach an output: unused cache rows hold NaN, unused table entries junk.
JUNK_PAGE_IDS = np.array([2**31 - 1, -7, 1 << 20], np.int32)
# At least one unused (junk) table entry per row, and NaN in the cache rows no sequence owns.
_POISON = dict(spare_entries=1, junk_ids=JUNK_PAGE_IDS, poisoned=True)

TOLERANCE = {  # (atol, rtol) on the output; lse is float32 math on both sides
    "float32": (2e-5, 2e-5),
    "float16": (4e-3, 4e-3),
    "bfloat16": (2e-2, 2e-2),
}


def assert_close(out, ref, dtype: str, what: str = "out"):
    out = np.asarray(jnp.asarray(out, jnp.float32))
    ref = np.asarray(jnp.asarray(ref, jnp.float32))
    assert out.shape == ref.shape, (what, out.shape, ref.shape)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref), err_msg=f"{what}: NaN pattern differs")
    np.testing.assert_array_equal(np.isinf(out), np.isinf(ref), err_msg=f"{what}: inf pattern differs")
    finite = np.isfinite(ref)
    atol, rtol = TOLERANCE[dtype] if what == "out" else (2e-3 if dtype != "float32" else 2e-5, 0)
    np.testing.assert_allclose(out[finite], ref[finite], atol=atol, rtol=rtol, err_msg=what)


@dataclasses.dataclass
class PagedCase:
    q: jax.Array
    k_cache: jax.Array
    v_cache: jax.Array
    kv_lens: jax.Array
    block_tables: jax.Array
    cu_q_lens: jax.Array | None

    def args(self):
        return self.q, self.k_cache, self.v_cache, self.kv_lens, self.block_tables, self.cu_q_lens


def paged_case(rng, *, q_lens, kv_lens, num_q_heads, num_kv_heads, head_dim, page_size, dtype,
               kv_layout="NHD", pad_rows=0, decode=False, spare_pages=3) -> PagedCase:
    return PagedCase(*_inputs.paged_inputs(
        rng, q_lens=q_lens, kv_lens=kv_lens, num_q_heads=num_q_heads, num_kv_heads=num_kv_heads,
        head_dim=head_dim, page_size=page_size, dtype=dtype, kv_layout=kv_layout, pad_rows=pad_rows,
        decode=decode, spare_pages=spare_pages, **_POISON))


@dataclasses.dataclass
class MlaCase:
    q_nope: jax.Array
    q_pe: jax.Array
    ckv_cache: jax.Array
    kpe_cache: jax.Array | None
    kv_lens: jax.Array
    block_tables: jax.Array

    def args(self):
        return self.q_nope, self.q_pe, self.ckv_cache, self.kpe_cache, self.kv_lens, self.block_tables


def mla_case(rng, *, kv_lens, s_q, num_heads, page_size, dtype, combined, spare_pages=2) -> MlaCase:
    return MlaCase(*_inputs.mla_inputs(rng, kv_lens=kv_lens, s_q=s_q, num_heads=num_heads,
                                       page_size=page_size, dtype=dtype, combined=combined,
                                       spare_pages=spare_pages, **_POISON))
