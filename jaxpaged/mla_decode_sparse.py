"""mla_decode_sparse: DeepSeek-V3.2's token-level top-k MLA decode, the public function and its
op's spec. Semantics: jaxpaged.reference.mla_decode_sparse. On a Hopper GPU its lists run on the
wgmma MLA kernel (src/mla_decode/sm90/, the formats mla_hopper_format names); elsewhere, and for
the other formats, on the portable MLA kernel (src/mla_decode/portable/).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxpaged import _checks, _extension, _sinks, _spec
from jaxpaged.mla_decode import (OPTION_WORDS, cache_dtypes, check_fp8_math, check_queries_and_caches, prepare,
                                 sequences_and_heads_plan)


class _MlaDecodeSparse(_spec.OpSpec):
    """Operands: q_nope, q_pe, ckv_cache, kpe_cache (ckv_cache again for a combined or 656-byte
    cache), indices [B, s_q, topk], topk_lens ([B], or [0]: every index counts), options (as
    mla_decode's). Params: scale, kv_scale, ds_read, fp8_math (as mla_decode's). Results: out, lse."""

    name = "mla_decode_sparse"

    def abstract_eval(self, q_nope, q_pe, ckv_cache, kpe_cache, indices, topk_lens, options, *, scale, kv_scale,
                      ds_read, fp8_math):
        batch, s_q, num_heads, num_pages, page_size = check_queries_and_caches(q_nope, q_pe, ckv_cache, kpe_cache)
        if indices.ndim != 3:
            raise ValueError(f"indices must have shape [B, s_q, topk]; got shape {indices.shape}")
        _checks.check_int32("indices", indices, (batch, s_q, indices.shape[2]), "[B, s_q, topk]")
        if topk_lens.shape != _checks.EMPTY_OPERAND:
            _checks.check_int32("topk_lens", topk_lens, (batch,), "[B]")
        if num_pages * page_size > _checks.INT32_MAX:
            raise ValueError(f"ckv_cache: num_pages * page_size ({num_pages} * {page_size}) must be below 2^31 "
                             "(token slots are int32)")
        _checks.check_options(options, OPTION_WORDS)
        return (jax.core.ShapedArray(q_nope.shape, q_nope.dtype),
                jax.core.ShapedArray((batch, s_q, num_heads), jnp.float32))

    def workspace_bytes(self, avals_in, params, device):
        q_nope, _, ckv_cache, kpe_cache, indices = avals_in[:5]
        batch, s_q, num_heads, _ = q_nope.shape
        return _extension.mla_decode_sparse_workspace_bytes(
            batch=batch, s_q=s_q, num_heads=num_heads, topk=indices.shape[2], page_size=ckv_cache.shape[1],
            device=device, ds_read=int(params["ds_read"]), fp8_math=int(params["fp8_math"]),
            **cache_dtypes(q_nope, ckv_cache, kpe_cache))

    def batch(self, args, dims, **params):
        """vmap folds the mapped axis into the batch axis. With mapped caches, instance i's token
        slots move to its part of the stacked pool (an out-of-range slot stays out of range)."""
        if dims[-1] is not None:
            return _spec.map_instances(self.primitive, args, dims, **params)
        q_nope, q_pe, ckv, kpe, indices, topk_lens, options = args
        n = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        move = lambda i, x: _spec.to_front(x, dims[i], n)  # noqa: E731
        q_nope, q_pe, indices = move(0, q_nope), move(1, q_pe), move(4, indices)
        batch = q_nope.shape[1]
        if dims[2] is not None or dims[3] is not None:
            ckv, kpe = move(2, ckv), move(3, kpe)
            indices = _spec.own_ids(indices, ckv.shape[1] * ckv.shape[2])  # slots into instance i's pool
            ckv, kpe = (c.reshape((n * c.shape[1],) + c.shape[2:]) for c in (ckv, kpe))
        if topk_lens.shape[-1:] != _checks.EMPTY_OPERAND:
            topk_lens = move(5, topk_lens).reshape(-1)
        fold = lambda x: x.reshape((n * batch,) + x.shape[2:])  # noqa: E731
        out, lse = self.primitive.bind(fold(q_nope), fold(q_pe), ckv, kpe, fold(indices), topk_lens, options,
                                       **params)
        return (out.reshape((n, batch) + out.shape[1:]), lse.reshape((n, batch) + lse.shape[1:])), (0, 0)

    def sharding_rule(self, avals_in, params):
        """Factors: b sequences, h query heads (as mla_decode); the caches stay whole."""
        lens = "b" if avals_in[5].shape != _checks.EMPTY_OPERAND else "t"
        rule = f"b q h l, b q h r, p s w, p s v, b q k, {lens}, o -> b q h l, b q h"
        plan = sequences_and_heads_plan(
            avals_in[0].shape, lambda seqs: [(seqs, None, None), (seqs if lens == "b" else None,), (None,)])
        whole = ["q", "l", "r", "p", "s", "w", "v", "k", "o"] + (["t"] if lens == "t" else [])
        return rule, {}, whole, plan


mla_decode_sparse_p = _spec.define(_MlaDecodeSparse())


def mla_decode_sparse(q_nope, q_pe, ckv_cache, kpe_cache, indices, *, scale, topk_lens=None, kv_scale=None,
                      sinks=None, ds_dequant="float32", fp8_math=False):
    """Sparse (top-k) MLA decode: each query row attends only the cache tokens its indices name.

    Args:
      q_nope, q_pe: [B, s_q, Hq, 512], [B, s_q, Hq, 64] queries (as mla_decode).
      ckv_cache, kpe_cache: any cache mla_decode takes (16-bit split or combined, fp8 with
        kv_scale, DeepSeek-V3.2's uint8 [num_pages, page_size, 656] rows with kpe_cache=None); its
        page axis is the token pool (no block table).
      indices: int [B, s_q, topk]: token slots page * page_size + offset; one that is negative or
        >= num_pages * page_size is no key (skipped, never read); a duplicate counts as often as
        it appears.
      scale: score scale (required). topk_lens: int [B] or None: only the first topk_lens[b]
        indices of batch row b count (clamped to [0, topk]). kv_scale, sinks, ds_dequant: as
        mla_decode (ds_dequant="float16" or "bfloat16": the fast paths for 656-byte rows on Hopper GPUs).
      fp8_math: as mla_decode's (a Python bool): on Hopper GPUs, lists over 656-byte rows with
        bfloat16 queries (any page size) then run the wide kernel's fp8 mode - e4m3 queries and
        probabilities, each latent group's probabilities scaled by the keys' group scales before
        their rounding - about 2^-4 relative error where ds_dequant="bfloat16" (FlashMLA's
        reading) has about 2^-8; every other path computes as without it.

    Returns:
      (out [B, s_q, Hq, 512] in q's dtype, lse [B, s_q, Hq] float32); a row with no key: out 0,
      lse -inf.
    """
    fp8_math = check_fp8_math(fp8_math, ckv_cache)
    indices = _checks.index_array("indices", indices, out_of_range=-1)
    topk_lens = (jnp.zeros(_checks.EMPTY_OPERAND, jnp.int32) if topk_lens is None
                 else _checks.index_array("topk_lens", topk_lens))
    kpe_cache, options, attrs, sinks = prepare(q_nope, ckv_cache, kpe_cache, scale, kv_scale, sinks,
                                               "mla_decode_sparse", ds_dequant)
    out, lse = mla_decode_sparse_p.bind(q_nope, q_pe, ckv_cache, kpe_cache, indices, topk_lens, options,
                                        fp8_math=int(fp8_math), **attrs)
    return (out, lse) if sinks is None else (_sinks.apply_sinks(out, lse, sinks), lse)
