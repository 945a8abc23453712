"""write_kv / write_mla_kv: new tokens' keys and values into their cache slots.

The new values are first cast, quantized (fp8; jaxpaged/_fp8.py defines the formats) or packed
(656-byte rows) into the cache's element type; then one write per cache puts each token's rows at
its slot, skipping out-of-range slots: jittable, command-buffer safe, and in place when the caller
donates the caches (jax.jit(..., donate_argnums=...), or caches carried through a lax.scan / while
loop), so its cost follows the tokens written, not the cache size. The write is one of
- "rows": the write_rows op below (src/write_rows/: K and V in one launch, the caches aliased to
  its results; its sharding rule splits the KV heads);
- "scatter": an XLA scatter per cache with distinct indices (unique_indices), partitioned by XLA
  like any scatter when the caches are sharded;
chosen by JAXPAGED_WRITE_IMPL; "auto" (the default) takes "rows" for writes of ROWS_MIN_BYTES or
more per cache and "scatter" below (H100, session 36: the kernel 51-60 us for 16K bf16 tokens
against the scatter's 58-63, 26-33 us fp8 against 41-46; a 64-token write 4-7 us slower as a
custom call).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from jaxpaged import _checks, _extension, _fp8, _spec
from jaxpaged.paged_attention import KV_LAYOUTS

LATENT_DIM, ROPE_DIM = 512, 64
_CACHE_DTYPES = _checks.FLOAT_DTYPES + _fp8.FP8_DTYPES


# "auto" (the rows kernel for writes of ROWS_MIN_BYTES or more per cache, else the scatter),
# "rows" or "scatter"; read per call.
WRITE_IMPL = os.environ.get("JAXPAGED_WRITE_IMPL", "auto")
# On the H100 (NOTES item 57) the kernel wrote 16K tokens (32 MiB per cache) as fast as the
# scatter in bf16 and 1.4x faster in fp8, while a 64-token write cost ~5 us more as a custom call
# than as a fused scatter (time per write in a chain of writes with nothing else in it).
ROWS_MIN_BYTES = 1 << 20


class _WriteRows(_spec.OpSpec):
    """Operands: k = 1 or 2 caches (write_kv's K and V in one call), each [P, page_size, H, W]
    (layout 0) or [P, H, page_size, W] (layout 1) with rows [N, H, W] of its dtype, or [P,
    page_size, W] (layout 0: write_mla_kv's caches, as they are - a reshape around the aliased call
    made XLA copy the whole cache twice) with rows [N, W]; slots int32 [N] (page * page_size +
    offset; outside [0, P * page_size): skipped). Param:
    layout. Results: the caches with each row at its slot, cache i aliased to result i (updated in
    place when the caller donates it). Of two rows naming one slot either may land (write_kv orders
    duplicates first)."""

    name = "write_rows"
    gpu_dtypes = tuple(np.dtype(d) for d in _CACHE_DTYPES) + (np.dtype(np.uint8),)
    gpu_workspace = False  # (the GPU handler binds the caches as its only results)

    def abstract_eval(self, *operands, layout):
        k = (len(operands) - 1) // 2
        if k not in (1, 2) or len(operands) != 2 * k + 1 or layout not in (0, 1):
            raise ValueError(f"write_rows takes 1 or 2 caches, their rows and the slots, layout 0 or 1; got "
                             f"{len(operands)} operands, layout {layout}")
        caches, rows, slots = operands[:k], operands[k:2 * k], operands[-1]
        if slots.ndim != 1:
            raise ValueError(f"slot_mapping must have shape [N]; got {slots.shape}")
        _checks.check_int32("slot_mapping", slots, slots.shape, "[N]")
        if k == 2 and (caches[0].shape != caches[1].shape or caches[0].dtype != caches[1].dtype):
            raise ValueError(f"write_rows writes two caches of one shape and dtype; got "
                             f"{caches[0].dtype}{list(caches[0].shape)} and {caches[1].dtype}{list(caches[1].shape)}")
        for cache, row in zip(caches, rows):
            if cache.ndim == 4:
                want = (slots.shape[0], cache.shape[2 - layout], cache.shape[3])
            else:
                want = (slots.shape[0], cache.shape[-1]) if cache.ndim == 3 and layout == 0 else None
            if want is None or row.shape != want or row.dtype != cache.dtype:
                raise ValueError(f"write_rows needs a 4-d cache with rows [N, H, W] or (layout 0) a 3-d one with "
                                 f"rows [N, W], the rows in the cache's dtype; got {cache.dtype}{list(cache.shape)} "
                                 f"and {row.dtype}{list(row.shape)}")
            if not rows_fit(cache):
                raise ValueError(f"write_rows needs rows of a multiple of 16 bytes; {cache.dtype}{list(cache.shape)} "
                                 f"has {cache.shape[-1] * np.dtype(cache.dtype).itemsize}")
        return tuple(jax.core.ShapedArray(c.shape, c.dtype) for c in caches)

    def operand_output_aliases(self, avals_in, params):
        return {i: i for i in range((len(avals_in) - 1) // 2)}

    def batch(self, args, dims, **params):
        """The instances folded into one call: their caches (an unmapped one copied to each
        instance, which the semantics ask for) as one page pool, each instance's slots moved to its
        own part of it (_spec.own_ids: a slot outside its own cache stays skipped), the rows
        concatenated. In place when the stacked caches are donated."""
        n, args = _spec.batched_at_front(args, dims)
        k = (len(args) - 1) // 2
        caches, rows, slots = args[:k], args[k:2 * k], args[-1]
        pool = [c.reshape((n * c.shape[1],) + c.shape[2:]) for c in caches]
        page_size = caches[0].shape[2 + params["layout"]]  # ([n, P, page, H, W] or [n, P, H, page, W])
        slots = _spec.own_ids(slots, caches[0].shape[1] * page_size).reshape(-1)
        rows = [r.reshape((-1,) + r.shape[2:]) for r in rows]
        out = self.primitive.bind(*pool, *rows, slots, **params)
        return [o.reshape(c.shape) for o, c in zip(out, caches)], [0] * k

    def sharding_rule(self, avals_in, params):
        """Factor h, the heads, may be split (the caches' KV-head axis with the rows' head axis:
        tensor parallelism); the page axis stays whole, since slots index the whole cache. The
        caches share factors: write_kv's K and V have one shape (a pair of unequal caches, as
        write_mla_kv's, is written in two calls)."""
        k = (len(avals_in) - 1) // 2
        if avals_in[0].ndim == 3:  # one head: nothing to split
            rule = ", ".join(["p s w"] * k + ["n w"] * k + ["n"]) + " -> " + ", ".join(["p s w"] * k)
            return rule, {}, ["p", "s", "w", "n"], lambda spec_of, fits: (
                [(None,) * 3] * k + [(None, None)] * k + [(None,)], [(None,) * 3] * k)
        cache = "p h s w" if params["layout"] else "p s h w"
        heads_dim, num_heads = 2 - params["layout"], avals_in[0].shape[2 - params["layout"]]

        def plan(spec_of, fits):
            heads = spec_of(0, heads_dim)
            if heads is not None and not fits(heads, num_heads):
                heads = None
            cache_spec = [None] * 4
            cache_spec[heads_dim] = heads
            cache_spec = tuple(cache_spec)
            return [cache_spec] * k + [(None, heads, None)] * k + [(None,)], [cache_spec] * k
        rule = ", ".join([cache] * k + ["n h w"] * k + ["n"]) + " -> " + ", ".join([cache] * k)
        return rule, {}, ["p", "s", "w", "n"], plan


write_rows_p = _spec.define(_WriteRows())


def rows_fit(cache) -> bool:
    """Whether the write_rows kernel takes this cache: rows (its last dimension) of 16k bytes."""
    return (cache.shape[-1] * np.dtype(cache.dtype).itemsize) % 16 == 0


def _rows_available() -> bool:
    """Whether write_rows can run where this computation will: the CPU handler always, a GPU only
    if this build has its kernel (a CPU-only build under a GPU JAX has not)."""
    return jax.default_backend() == "cpu" or "jaxpaged_write_rows" in _extension.GPU_TARGETS


def last_writer_slots(slots, num_slots: int):
    """slots with every token that a later token overwrites (same valid slot) set to -1, so that the
    last token naming a slot is the one written, as in the sequential reference. Parallel writes of
    two tokens to one slot are not ordered: XLA's GPU scatter, for one, mixes their rows element by
    element. One sort of the N (slot, token) pairs; the caller may skip it (unique_slots=True)."""
    n = slots.shape[0]
    if n < 2:
        return slots
    valid = (slots >= 0) & (slots < num_slots)
    key = jnp.where(valid, slots, -1)
    token = jnp.arange(n, dtype=jnp.int32)
    key_sorted, token_sorted = jax.lax.sort((key, token), num_keys=2)  # by slot, then token order
    last = jnp.concatenate([key_sorted[1:] != key_sorted[:-1], jnp.ones((1,), bool)])
    keep = jnp.zeros((n,), bool).at[token_sorted].set(last, unique_indices=True)
    return jnp.where(keep & valid, slots, -1)


def _writer(slot_mapping, num_new: int, num_pages: int, page_size: int, hnd: bool = False,
            unique_slots: bool = False):
    """put(cache, rows[, cache_b, rows_b]) -> (cache, [cache_b]): each cache with its rows (its
    dtype; [N, ...] shaped like one slot's contents) at their slots, those outside
    [0, num_pages * page_size) skipped, of tokens naming one slot the last (unless unique_slots
    promises there are none). hnd: [P, Hkv, page, D] caches."""
    slots = _checks.index_array("slot_mapping", slot_mapping, out_of_range=-1)
    if slots.shape != (num_new,):
        raise ValueError(f"slot_mapping must have shape [N] = ({num_new},); got {slots.shape}")
    if not _checks.static_bool("unique_slots", unique_slots):
        slots = last_writer_slots(slots, num_pages * page_size)
    if WRITE_IMPL not in ("auto", "rows", "scatter"):
        raise ValueError(f"JAXPAGED_WRITE_IMPL must be auto, rows or scatter; got {WRITE_IMPL!r}")
    rows = _rows_writer(slots, hnd)
    if WRITE_IMPL == "rows":
        return rows
    scatter = _scatter_writer(slots, num_new, num_pages, page_size, hnd)
    if WRITE_IMPL == "scatter":
        return scatter

    def put(*pairs):
        big = min(np.dtype(r.dtype).itemsize * r.size for r in pairs[1::2]) >= ROWS_MIN_BYTES
        fit = all(rows_fit(c) for c in pairs[0::2]) and _rows_available()
        return (rows if big and fit else scatter)(*pairs)
    return _per_shape(put)


def _per_shape(put):
    """put for pairs of caches: one call for caches of one shape (write_kv's K and V), one each
    for caches of two shapes (write_mla_kv's ckv and kpe)."""
    def each(*pairs):
        if len(pairs) == 4 and pairs[0].shape != pairs[2].shape:
            return put(*pairs[:2]) + put(*pairs[2:])
        return put(*pairs)
    return each


def _rows_writer(slots, hnd: bool):
    """The write through the write_rows kernel (write_rows_p): put(cache, rows) or put(cache_a,
    rows_a, cache_b, rows_b), one call (one launch) for caches of one shape, else one each."""
    def put(*pairs):
        caches, rows = pairs[0::2], pairs[1::2]
        return tuple(write_rows_p.bind(*caches, *rows, slots, layout=int(hnd)))
    return _per_shape(put)


def _scatter_writer(slots, num_new: int, num_pages: int, page_size: int, hnd: bool):
    """The write as XLA scatters, one per cache."""
    # XLA scatter over the cache viewed as [slots, row] (NHD, MLA: a free reshape) or by (page,
    # offset) (HND). Every index is distinct - valid slots after the dedup above, and invalid token
    # i gets the out-of-range index past_end + i, which mode="drop" skips (a negative index would
    # wrap around instead) - so XLA may be told unique_indices: on the H100 that made the write
    # 4.5x faster (bench/serving_ops.py, 16K tokens: 75 vs 339 us; NOTES item 32).
    num_slots, n = num_pages * page_size, num_new
    token = jnp.arange(n, dtype=jnp.int32)
    valid = (slots >= 0) & (slots < num_slots)
    if hnd:
        page = jnp.where(valid, slots // page_size, num_pages + token)
        offset = jnp.where(valid, slots % page_size, 0)
        return _each(lambda cache, rows: cache.at[page, :, offset].set(rows, mode="drop", unique_indices=True))
    distinct = num_slots + n <= np.iinfo(np.int32).max  # else the invalid share one index
    index = jnp.where(valid, slots, num_slots + token if distinct else num_slots)

    def put(cache, rows):
        row = int(np.prod(cache.shape[2:]))
        flat = cache.reshape(num_slots, row).at[index].set(rows.reshape(n, row), mode="drop",
                                                           unique_indices=distinct)
        return flat.reshape(cache.shape)
    return _each(put)


def _each(put_one):
    """put(cache, rows, ...) -> tuple: put_one applied to each (cache, rows) pair."""
    return lambda *pairs: tuple(put_one(c, r) for c, r in zip(pairs[0::2], pairs[1::2]))


def _check_cache(name: str, cache, rank: int, expected: str):
    cache = jnp.asarray(cache)
    if cache.ndim != rank:
        raise ValueError(f"{name} must have shape {expected} (rank {rank}); got shape {cache.shape}")
    if cache.dtype not in _CACHE_DTYPES:
        raise ValueError(f"{name} must be bfloat16, float16, float32, float8_e4m3fn or float8_e5m2; "
                         f"got {cache.dtype}")
    return cache


def _check_new(name: str, x, shape: tuple, expected: str):
    x = jnp.asarray(x)
    if x.shape != shape:
        raise ValueError(f"{name} must have shape {expected} = {shape}; got {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise ValueError(f"{name} must be a float array; got {x.dtype}")
    return x


def _stored(name: str, x, cache_dtype, scale, scale_name: str):
    """x as the cache stores it: quantized with `scale` into an fp8 cache, else cast."""
    if _fp8.is_fp8(cache_dtype):
        scale = 1.0 if scale is None else _checks.option(scale_name, scale, positive=True)
        return _fp8.quantize(x, scale, cache_dtype)
    if scale is not None:
        raise ValueError(f"{scale_name} applies to fp8 caches only; {name}'s cache is {np.dtype(cache_dtype)}")
    return x.astype(cache_dtype)


def write_kv(k_cache, v_cache, k_new, v_new, slot_mapping, *, k_scale=None, v_scale=None, kv_layout="NHD",
             unique_slots=False):
    """Writes N new tokens' keys and values into a paged KV cache.

    Args:
      k_cache, v_cache: the caches of jaxpaged.paged_attention ("NHD" [P, page_size, Hkv, D] or
        "HND" [P, Hkv, page_size, D]), 16/32-bit float or fp8 (float8_e4m3fn / float8_e5m2).
      k_new, v_new: [N, Hkv, D] float.
      slot_mapping: int [N], slot = page * page_size + offset of each token; a slot outside
        [0, P * page_size) (e.g. -1 for a padding token) is skipped. If several tokens name one
        slot, the last of them is written (as if the tokens were written one after another).
      k_scale, v_scale: fp8 caches only: values are stored as x / scale (saturated, round to nearest
        even); default 1.0; Python numbers or traced scalars.
      unique_slots: the caller promises that no two tokens name one valid slot (a serving stack's
        slot mapping), which skips the sort that orders duplicates. If the promise is broken, a
        duplicated slot holds unspecified values (possibly a mix of the tokens'); nothing outside
        the named slots is written either way.

    Returns:
      (k_cache, v_cache) updated; in place when the caller donates them.
    """
    if kv_layout not in KV_LAYOUTS:
        raise ValueError(f"kv_layout must be 'NHD' or 'HND'; got {kv_layout!r}")
    layout = "[P, page_size, Hkv, D]" if kv_layout == "NHD" else "[P, Hkv, page_size, D]"
    k_cache = _check_cache("k_cache", k_cache, 4, layout)
    v_cache = _check_cache("v_cache", v_cache, 4, layout)
    if v_cache.shape != k_cache.shape or v_cache.dtype != k_cache.dtype:
        raise ValueError(f"v_cache must match k_cache {k_cache.dtype}{list(k_cache.shape)}; "
                         f"got {v_cache.dtype}{list(v_cache.shape)}")
    if kv_layout == "NHD":
        num_pages, page_size, num_kv_heads, head_dim = k_cache.shape
    else:
        num_pages, num_kv_heads, page_size, head_dim = k_cache.shape
    num_new = jnp.shape(k_new)[0] if jnp.ndim(k_new) else 0
    k_new = _check_new("k_new", k_new, (num_new, num_kv_heads, head_dim), "[N, Hkv, D]")
    v_new = _check_new("v_new", v_new, (num_new, num_kv_heads, head_dim), "[N, Hkv, D]")
    put = _writer(slot_mapping, num_new, num_pages, page_size, hnd=kv_layout == "HND", unique_slots=unique_slots)
    k_new = _stored("k_new", k_new, k_cache.dtype, k_scale, "k_scale")
    v_new = _stored("v_new", v_new, v_cache.dtype, v_scale, "v_scale")
    return put(k_cache, k_new, v_cache, v_new)


def write_mla_kv(ckv_cache, kpe_cache, ckv_new, kpe_new, slot_mapping, *, kv_scale=None, unique_slots=False):
    """Writes N new tokens' latent (512) and rope (64) parts into an MLA cache.

    Args:
      ckv_cache, kpe_cache: the caches of jaxpaged.mla_decode: [P, page_size, 512] + [P, page_size,
        64]; or kpe_cache=None with a combined [P, page_size, 576] cache (16/32-bit float or
        float8_e4m3fn), or DeepSeek-V3.2's uint8 [P, page_size, 656] rows (each group of 128 latent
        values gets scale max|x| / 448, 1.0 for an all-zero group; the rope stays bfloat16). An fp8
        ckv_cache of the split layout keeps a 16-bit kpe_cache.
      ckv_new, kpe_new: [N, 512], [N, 64] float. slot_mapping, unique_slots: as in write_kv.
      kv_scale: fp8 (float8_e4m3fn) caches only: per-tensor scale, default 1.0.

    Returns:
      (ckv_cache, kpe_cache) updated (kpe_cache None when it was None); in place when donated.
    """
    ckv_cache = jnp.asarray(ckv_cache)
    if ckv_cache.ndim != 3:
        raise ValueError(f"ckv_cache must have shape [P, page_size, W] (W = 512, 576 or 656); got {ckv_cache.shape}")
    num_pages, page_size, width = ckv_cache.shape
    num_new = jnp.shape(ckv_new)[0] if jnp.ndim(ckv_new) else 0
    ckv_new = _check_new("ckv_new", ckv_new, (num_new, LATENT_DIM), "[N, 512]")
    kpe_new = _check_new("kpe_new", kpe_new, (num_new, ROPE_DIM), "[N, 64]")
    put = _writer(slot_mapping, num_new, num_pages, page_size, unique_slots=unique_slots)
    if kpe_cache is not None:
        if width != LATENT_DIM:
            raise ValueError(f"ckv_cache must be [P, page_size, 512] with a kpe_cache; got {ckv_cache.shape}")
        ckv_cache = _check_cache("ckv_cache", ckv_cache, 3, "[P, page_size, 512]")
        kpe_cache = _check_cache("kpe_cache", kpe_cache, 3, "[P, page_size, 64]")
        if kpe_cache.shape != (num_pages, page_size, ROPE_DIM) or _fp8.is_fp8(kpe_cache.dtype):
            raise ValueError(f"kpe_cache must be a 16/32-bit float [P, page_size, 64] = "
                             f"{(num_pages, page_size, ROPE_DIM)}; got {kpe_cache.dtype}{list(kpe_cache.shape)}")
        return put(ckv_cache, _stored("ckv_new", ckv_new, ckv_cache.dtype, kv_scale, "kv_scale"),
                   kpe_cache, kpe_new.astype(kpe_cache.dtype))
    if width == _fp8.DS_ROW_BYTES and ckv_cache.dtype == np.uint8:
        if kv_scale is not None:
            raise ValueError("kv_scale does not apply to the 656-byte cache (its rows carry their own scales)")
        return put(ckv_cache, _fp8.pack_ds_rows(ckv_new, kpe_new))[0], None
    if width != LATENT_DIM + ROPE_DIM:
        raise ValueError(f"ckv_cache must be [P, page_size, 576] or uint8 [P, page_size, 656] when kpe_cache "
                         f"is None; got {ckv_cache.dtype}{list(ckv_cache.shape)}")
    ckv_cache = _check_cache("ckv_cache", ckv_cache, 3, "[P, page_size, 576]")
    rows = jnp.concatenate([ckv_new.astype(jnp.float32), kpe_new.astype(jnp.float32)], axis=-1)
    return put(ckv_cache, _stored("ckv_new", rows, ckv_cache.dtype, kv_scale, "kv_scale"))[0], None
