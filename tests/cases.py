"""Random test inputs shaped like a serving stack's: shuffled pages, poisoned unused memory."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

ON_GPU = jax.default_backend() == "gpu"
# 16-bit floats everywhere; float32 only where it is supported (the CPU handlers).
DTYPES = ["bfloat16", "float16"] + ([] if ON_GPU else ["float32"])
# Values that must never reach an output: unused cache rows hold NaN, unused table entries junk.
JUNK_PAGE_IDS = np.array([2**31 - 1, -7, 1 << 20], np.int32)

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


def _page_pool(rng, lens, page_size, spare_pages):
    """Shuffled page ids for each sequence, the table (junk past each sequence's pages), pool size."""
    need = [-(-L // page_size) for L in lens]
    max_pages = max(need + [1]) + 1  # at least one unused entry per row
    num_pages = sum(need) + spare_pages
    ids = rng.permutation(num_pages).astype(np.int32)
    table = rng.choice(JUNK_PAGE_IDS, size=(len(lens), max_pages)).astype(np.int32)
    used = np.zeros(num_pages, bool)
    pos = 0
    for s, n in enumerate(need):
        table[s, :n] = ids[pos:pos + n]
        used[ids[pos:pos + n]] = True
        pos += n
    return table, num_pages, used


def _poison(cache, used_pages, lens, table, page_size, slot_axis):
    """NaN into every cache row no sequence owns: unused pages and the tail of partial pages."""
    cache = cache.copy()
    cache[~used_pages] = np.nan
    for s, L in enumerate(lens):
        if L % page_size:
            page = table[s, L // page_size]
            idx = [page, slice(None), slice(None), slice(None)][: cache.ndim]
            idx[slot_axis] = slice(L % page_size, None)
            cache[tuple(idx)] = np.nan
    return cache


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
    table, num_pages, used = _page_pool(rng, kv_lens, page_size, spare_pages)
    shape = (num_pages, page_size, num_kv_heads, head_dim)
    k = rng.standard_normal(shape, np.float32)
    v = rng.standard_normal(shape, np.float32)
    k, v = (_poison(x, used, kv_lens, table, page_size, slot_axis=1) for x in (k, v))
    if kv_layout == "HND":
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    num_tokens = sum(q_lens) + pad_rows
    q = rng.standard_normal((num_tokens, num_q_heads, head_dim), np.float32)
    cu = None if decode else jnp.asarray(np.concatenate([[0], np.cumsum(q_lens)]), jnp.int32)
    to = lambda x: jnp.asarray(x, dtype)
    return PagedCase(to(q), to(k), to(v), jnp.asarray(kv_lens, jnp.int32), jnp.asarray(table), cu)


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
    table, num_pages, used = _page_pool(rng, kv_lens, page_size, spare_pages)
    cache = rng.standard_normal((num_pages, page_size, 576), np.float32)
    cache = _poison(cache, used, kv_lens, table, page_size, slot_axis=1)
    batch = len(kv_lens)
    q_nope = rng.standard_normal((batch, s_q, num_heads, 512), np.float32)
    q_pe = rng.standard_normal((batch, s_q, num_heads, 64), np.float32)
    to = lambda x: jnp.asarray(x, dtype)
    if combined:
        ckv, kpe = to(cache), None
    else:
        ckv, kpe = to(cache[..., :512]), to(cache[..., 512:])
    return MlaCase(to(q_nope), to(q_pe), ckv, kpe, jnp.asarray(kv_lens, jnp.int32), jnp.asarray(table))
