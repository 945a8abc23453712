"""Random inputs shaped like a serving stack's, shared by the tests, the benchmark and the main job:
each sequence's pages shuffled through one pool, and optionally junk in every table entry and NaN
in every cache row that no sequence owns (the tests' poison: none of it may reach an output)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

MLA_LATENT_DIM, MLA_ROPE_DIM = 512, 64


def page_pool(rng, lens, page_size, *, spare_pages=0, spare_entries=0, junk_ids=None):
    """Shuffled page ids for each sequence of length lens[s]: (table, num_pages, used).

    The pool holds every sequence's pages plus `spare_pages` that nobody owns; the table has room
    for the longest sequence plus `spare_entries`, its unused entries drawn from `junk_ids` (0 when
    None); used[page] says whether a sequence owns the page.
    """
    need = [-(-int(L) // page_size) for L in lens]
    max_pages = max(need + [1]) + spare_entries
    num_pages = sum(need) + spare_pages
    ids = rng.permutation(num_pages).astype(np.int32)
    if junk_ids is None:
        table = np.zeros((len(lens), max_pages), np.int32)
    else:
        table = rng.choice(junk_ids, size=(len(lens), max_pages)).astype(np.int32)
    used = np.zeros(num_pages, bool)
    pos = 0
    for s, n in enumerate(need):
        table[s, :n] = ids[pos:pos + n]
        used[ids[pos:pos + n]] = True
        pos += n
    return table, num_pages, used


def poison(cache, used_pages, lens, table, page_size, slot_axis):
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


def _caches(rng, shape, count, dtype, on_device):
    """`count` standard-normal caches: float32 numpy arrays from rng, or (on_device) arrays of
    `dtype` drawn by jax.random on the default device from keys rng supplies (fast at gigabytes)."""
    if on_device:
        return [jax.random.normal(jax.random.key(int(rng.integers(1 << 30))), shape, dtype) for _ in range(count)]
    return [rng.standard_normal(shape, np.float32) for _ in range(count)]


def paged_inputs(rng, *, q_lens, kv_lens, num_q_heads, num_kv_heads, head_dim, page_size, dtype,
                 kv_layout="NHD", pad_rows=0, decode=False, spare_pages=0, spare_entries=0,
                 junk_ids=None, poisoned=False, on_device=False):
    """(q, k_cache, v_cache, kv_lens, block_tables, cu_q_lens) for paged attention, in `dtype`.

    q has sum(q_lens) + pad_rows rows; cu_q_lens is None when `decode`. Draws the table, then the
    caches (see _caches), then q. `poisoned` puts NaN in the cache rows no sequence owns.
    """
    table, num_pages, used = page_pool(rng, kv_lens, page_size, spare_pages=spare_pages,
                                       spare_entries=spare_entries, junk_ids=junk_ids)
    k, v = _caches(rng, (num_pages, page_size, num_kv_heads, head_dim), 2, dtype, on_device)
    if poisoned:
        assert not on_device, "poisoning works on host arrays"
        k, v = (poison(x, used, kv_lens, table, page_size, slot_axis=1) for x in (k, v))
    if kv_layout == "HND":
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    q = rng.standard_normal((sum(q_lens) + pad_rows, num_q_heads, head_dim), np.float32)
    cu = None if decode else jnp.asarray(np.concatenate([[0], np.cumsum(q_lens)]), jnp.int32)
    to = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    return to(q), to(k), to(v), jnp.asarray(kv_lens, jnp.int32), jnp.asarray(table), cu


def mla_inputs(rng, *, kv_lens, s_q, num_heads, page_size, dtype, combined=True, spare_pages=0,
               spare_entries=0, junk_ids=None, poisoned=False, on_device=False):
    """(q_nope, q_pe, ckv_cache, kpe_cache, kv_lens, block_tables) for MLA decode, in `dtype`.

    One cache of 576-wide rows; when not `combined` it is split into the latent and rope caches.
    Draws the table, then the cache (see _caches), then q_nope and q_pe. `poisoned` puts NaN in
    the cache rows no sequence owns.
    """
    table, num_pages, used = page_pool(rng, kv_lens, page_size, spare_pages=spare_pages,
                                       spare_entries=spare_entries, junk_ids=junk_ids)
    width = MLA_LATENT_DIM + MLA_ROPE_DIM
    (cache,) = _caches(rng, (num_pages, page_size, width), 1, dtype, on_device)
    if poisoned:
        assert not on_device, "poisoning works on host arrays"
        cache = poison(cache, used, kv_lens, table, page_size, slot_axis=1)
    batch = len(kv_lens)
    q_nope = rng.standard_normal((batch, s_q, num_heads, MLA_LATENT_DIM), np.float32)
    q_pe = rng.standard_normal((batch, s_q, num_heads, MLA_ROPE_DIM), np.float32)
    to = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    if combined:
        ckv, kpe = to(cache), None
    else:
        ckv, kpe = to(cache[..., :MLA_LATENT_DIM]), to(cache[..., MLA_LATENT_DIM:])
    return to(q_nope), to(q_pe), ckv, kpe, jnp.asarray(kv_lens, jnp.int32), jnp.asarray(table)
