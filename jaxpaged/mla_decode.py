"""The mla_decode primitive: shape rule, lowering, batching rule; and the public function.

Semantics are defined by jaxpaged.reference.mla_decode; see its docstring.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.interpreters import batching

from jaxpaged import _checks, _primitive, _sharding

LATENT_DIM = 512  # compressed KV width; also the value/output width
ROPE_DIM = 64     # rotary part of the key


def _abstract_eval(q_nope, q_pe, ckv_cache, kpe_cache, kv_lens, block_tables, *, scale, causal):
    _checks.check_rank("q_nope", q_nope, 4, "[B, s_q, Hq, 512]")
    _checks.check_float("q_nope", q_nope)
    batch, s_q, num_heads, latent = q_nope.shape
    if latent != LATENT_DIM:
        raise ValueError(f"q_nope must have shape [B, s_q, Hq, 512]; got {q_nope.shape}")
    if q_pe.shape != (batch, s_q, num_heads, ROPE_DIM):
        raise ValueError(f"q_pe must have shape [B, s_q, Hq, 64] = {(batch, s_q, num_heads, ROPE_DIM)}; "
                         f"got {q_pe.shape}")
    _checks.check_same_dtype("q_pe", q_pe, "q_nope", q_nope)
    _checks.check_rank("ckv_cache", ckv_cache, 3, "[num_pages, page_size, 512 or 576]")
    _checks.check_same_dtype("ckv_cache", ckv_cache, "q_nope", q_nope)
    num_pages, page_size, width = ckv_cache.shape
    combined = width == LATENT_DIM + ROPE_DIM  # kpe_cache is then ckv_cache again, unread
    if width not in (LATENT_DIM, LATENT_DIM + ROPE_DIM):
        raise ValueError(f"ckv_cache's last dim must be 512 (with kpe_cache) or 576 (combined, "
                         f"kpe_cache=None); got shape {ckv_cache.shape}")
    if not combined:
        _checks.check_same_dtype("kpe_cache", kpe_cache, "q_nope", q_nope)
        if kpe_cache.shape != (num_pages, page_size, ROPE_DIM):
            raise ValueError(f"kpe_cache must have shape [num_pages, page_size, 64] = "
                             f"{(num_pages, page_size, ROPE_DIM)}; got {kpe_cache.shape}")
    _checks.check_page_size("ckv_cache", page_size)
    _checks.check_int32("kv_lens", kv_lens, (batch,), "[B]")
    if block_tables.ndim != 2:
        raise ValueError(f"block_tables must have shape [B, max_pages]; got shape {block_tables.shape}")
    _checks.check_int32("block_tables", block_tables, (batch, block_tables.shape[1]), "[B, max_pages]")
    return (jax.core.ShapedArray(q_nope.shape, q_nope.dtype),
            jax.core.ShapedArray((batch, s_q, num_heads), jnp.float32))


# What users bind (shape and batching rules); it lowers through the sharding rule to the FFI
# primitive below (jaxpaged/_sharding.py).
mla_decode_p = _primitive.make_primitive("jaxpaged_mla_decode", _abstract_eval)
_mla_decode_ffi_p = _primitive.make_primitive("jaxpaged_mla_decode_ffi", _abstract_eval)


def _rows_per_block(rows: int) -> int:
    """Query rows (s_q x Hq of one sequence) per block of the sm_80 kernel; mirrors mla_row_tiles."""
    return 64 if rows >= 64 else 16


# The Hopper kernel's partition count is at most this many SMs' worth (kMlaMaxPartitions in
# src/mla_decode/partition_schedule.cuh); 64 query rows per block.
_MAX_PARTITIONS = 160
_HOPPER_ROWS = 64


def _hopper_workspace_floats(batch: int, rows_per_b: int) -> int:
    """Mirrors hopper_workspace_floats (src/mla_decode/handler_gpu.cu) at the largest partition count."""
    parts = max(1, _MAX_PARTITIONS // -(-rows_per_b // _HOPPER_ROWS))
    schedule_ints = 2 + 2 * parts + 3 * batch
    return -(-schedule_ints // 4) * 4 + 2 * parts * rows_per_b * (LATENT_DIM + 1)


def _workspace_floats(avals_in, params) -> int:
    """Scratch for whichever GPU path runs (chosen on the device): the larger of the two."""
    q_nope, _, ckv_cache, _, _, block_tables = avals_in
    batch, s_q, num_heads, _ = q_nope.shape
    rows = batch * s_q * num_heads
    blocks = batch * -(-(s_q * num_heads) // _rows_per_block(s_q * num_heads))
    splits = _primitive.kv_split_cap(blocks, block_tables.shape[1] * ckv_cache.shape[1])
    sm80 = 0 if splits == 1 else splits * rows * (LATENT_DIM + 1)
    return max(sm80, _hopper_workspace_floats(batch, s_q * num_heads))


_sharding.register_partitioned_lowering(mla_decode_p, _mla_decode_ffi_p, _sharding.mla_decode_rule)
_primitive.register_lowerings(_mla_decode_ffi_p, "jaxpaged_mla_decode", workspace_floats=_workspace_floats)


def _batch_rule(args, dims, **params):
    """vmap folds the mapped axis into the batch axis (pages offset when the caches are mapped)."""
    _, (q_nope, q_pe, ckv, kpe, kv_lens, block_tables) = _primitive.batched_at_front(args, dims)
    n, batch = q_nope.shape[:2]
    num_pages = ckv.shape[1]
    if dims[2] is not None or dims[3] is not None:
        ckv = ckv.reshape((n * num_pages,) + ckv.shape[2:])
        kpe = kpe.reshape((n * num_pages,) + kpe.shape[2:])
        block_tables = block_tables + (jnp.arange(n, dtype=jnp.int32) * num_pages)[:, None, None]
    else:
        ckv, kpe = ckv[0], kpe[0]
    fold = lambda x: x.reshape((n * batch,) + x.shape[2:])
    out, lse = mla_decode_p.bind(fold(q_nope), fold(q_pe), ckv, kpe, fold(kv_lens), fold(block_tables),
                                 **params)
    return (out.reshape((n, batch) + out.shape[1:]), lse.reshape((n, batch) + lse.shape[1:])), (0, 0)


batching.primitive_batchers[mla_decode_p] = _batch_rule


def mla_decode(q_nope, q_pe, ckv_cache, kpe_cache, kv_lens, block_tables, *, scale, causal=False):
    """DeepSeek multi-head latent attention decode over a paged latent cache.

    Args:
      q_nope: [B, s_q, Hq, 512] query in the latent space (q's nope part absorbed through W_UK).
      q_pe: [B, s_q, Hq, 64] rotary part of the query.
      ckv_cache: [num_pages, page_size, 512] latent cache with kpe_cache [num_pages, page_size, 64],
        or the combined [num_pages, page_size, 576] layout (latent then rope) with kpe_cache=None.
      kv_lens: int32 [B]; block_tables: int32 [B, max_pages].
      scale: score scale (required: MLA's softmax scale uses the pre-absorption head dim).
      causal: query i of s_q sees keys j <= kv_len - s_q + i (speculative / MTP decoding).

    Returns:
      (out [B, s_q, Hq, 512] in q's dtype, lse [B, s_q, Hq] float32). Exact rule:
      jaxpaged.reference.mla_decode.
    """
    if scale is None:
        raise ValueError("scale is required for mla_decode (e.g. 1/sqrt(128 + 64) for DeepSeek-V3)")
    combined = jnp.shape(ckv_cache)[-1:] == (LATENT_DIM + ROPE_DIM,)
    if kpe_cache is None:
        if not combined:
            raise ValueError(f"ckv_cache must be [num_pages, page_size, 576] when kpe_cache is None; "
                             f"got shape {jnp.shape(ckv_cache)}")
        # Combined layout: the same buffer goes in twice; the kernel addresses its rope part in place.
        kpe_cache = ckv_cache
    elif combined:
        raise ValueError("kpe_cache must be None when ckv_cache is the combined 576-wide layout")
    return tuple(mla_decode_p.bind(q_nope, q_pe, ckv_cache, kpe_cache, kv_lens, block_tables,
                                   scale=float(scale), causal=bool(causal)))
