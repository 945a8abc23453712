"""mla_decode_sparse: DeepSeek-V3.2's token-level top-k MLA decode, the public function and its
op's spec. Semantics: jaxpaged.reference.mla_decode_sparse. On a Hopper GPU its lists run on the
wgmma MLA kernel (src/mla_decode/sm90/, the formats mla_hopper_format names); elsewhere, and for
the other formats, on the portable MLA kernel (src/mla_decode/portable/).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxpaged import _checks, _extension, _sinks, _spec
from jaxpaged.mla_decode import (OPTION_WORDS, MlaDecodePlan, _no_plan, _plan_operands, cache_dtypes, check_fp8_math,
                                 check_queries_and_caches, mla_decode_plan_p, prepare, sequences_and_heads_plan)


class _MlaDecodeSparse(_spec.OpSpec):
    """Operands: q_nope, q_pe, ckv_cache, kpe_cache (ckv_cache again for a combined or 656-byte
    cache), indices [B, s_q, topk], topk_lens ([B], or [0]: every index counts), options (as
    mla_decode's), plan (a schedule from mla_decode_sparse_plan, else int32 [0]). Params: scale,
    kv_scale, ds_read, fp8_math (as mla_decode's), plan_rows / plan_capacity (the Hq and topk the plan
    was made for; 0 without one). Results: out, lse."""

    name = "mla_decode_sparse"

    def abstract_eval(self, q_nope, q_pe, ckv_cache, kpe_cache, indices, topk_lens, options, plan, *, scale,
                      kv_scale, ds_read, fp8_math, plan_rows, plan_capacity):
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
        if plan.dtype != np.int32 or plan.ndim != 1:
            raise ValueError(f"plan must be an int32 vector (jaxpaged.mla_decode_sparse_plan); got {plan.dtype} "
                             f"{plan.shape}")
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
        # (a plan is for one instance's lists: the folded call makes its own schedule, the same)
        args, dims = (*args[:-1], _no_plan()), (*dims[:-1], None)
        params = dict(params, plan_rows=0, plan_capacity=0)
        if dims[-2] is not None:
            return _spec.map_instances(self.primitive, args, dims, **params)
        q_nope, q_pe, ckv, kpe, indices, topk_lens, options, plan = args
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
        out, lse = self.primitive.bind(fold(q_nope), fold(q_pe), ckv, kpe, fold(indices), topk_lens, options, plan,
                                       **params)
        return (out.reshape((n, batch) + out.shape[1:]), lse.reshape((n, batch) + lse.shape[1:])), (0, 0)

    def sharding_rule(self, avals_in, params):
        """Factors: b sequences, h query heads (as mla_decode); the caches stay whole (and a plan: a
        device's call, smaller than the one it was made for, computes its own schedule)."""
        lens = "b" if avals_in[5].shape != _checks.EMPTY_OPERAND else "t"
        rule = f"b q h l, b q h r, p s w, p s v, b q k, {lens}, o, z -> b q h l, b q h"
        plan = sequences_and_heads_plan(
            avals_in[0].shape, lambda seqs: [(seqs, None, None), (seqs if lens == "b" else None,), (None,), (None,)])
        whole = ["q", "l", "r", "p", "s", "w", "v", "k", "o", "z"] + (["t"] if lens == "t" else [])
        return rule, {}, whole, plan


mla_decode_sparse_p = _spec.define(_MlaDecodeSparse())


def mla_decode_sparse(q_nope, q_pe, ckv_cache, kpe_cache, indices, *, scale, topk_lens=None, kv_scale=None,
                      sinks=None, ds_dequant="float32", fp8_math=False, plan=None):
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
      plan: None, or mla_decode_sparse_plan(indices, topk_lens, num_heads=Hq) made for these list
        lengths (once per serving step for all layers); the results are the same either way.

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
    batch, s_q, num_heads = (jnp.shape(q_nope) + (0, 0, 0))[:3]
    plan, plan_attrs = _plan_operands(plan, batch * s_q, num_heads, (jnp.shape(indices) + (0, 0, 0))[2],
                                      "sparse", ("B x s_q", "Hq", "topk"))
    out, lse = mla_decode_sparse_p.bind(q_nope, q_pe, ckv_cache, kpe_cache, indices, topk_lens, options, plan,
                                        fp8_math=int(fp8_math), **attrs, **plan_attrs)
    return (out, lse) if sinks is None else (_sinks.apply_sinks(out, lse, sinks), lse)


def mla_decode_sparse_plan(indices, topk_lens=None, *, num_heads: int) -> MlaDecodePlan:
    """The schedule of mla_decode_sparse calls over index lists of these lengths, made once per
    serving step and passed to every layer's call (`mla_decode_sparse(..., plan=plan)`), which then
    skips computing its own (as FlashMLA's metadata): one small kernel per step instead of one per
    layer on the Hopper path (elsewhere a plan is accepted and unused). Results are identical with
    and without it.

    Args:
      indices: int [B, s_q, topk], as the calls will get them (only its shape is read).
      topk_lens: int [B] or None, as the calls will get them (the plan is made from their values).
      num_heads: the calls' Hq.

    A plan fits calls with the same B, s_q, Hq and topk (else a ValueError) on the same kind of
    device; jit-, scan- and vmap-safe. Under vmap or a sharded call the GPU computes its own
    schedule, with the same results.
    """
    shape = jnp.shape(indices)
    if len(shape) != 3:
        raise ValueError(f"indices must have shape [B, s_q, topk]; got shape {shape}")
    num_heads = _checks.positive_int("num_heads", num_heads)
    batch, s_q, topk = (int(x) for x in shape)
    if topk_lens is None:
        lens = jnp.full((batch,), topk, jnp.int32)
    else:
        topk_lens = _checks.index_array("topk_lens", topk_lens)
        _checks.check_int32("topk_lens", topk_lens, (batch,), "[B]")
        lens = jnp.clip(topk_lens, 0, topk)
    # (the calls' schedule: B x s_q lists of Hq query rows each, list i of topk_lens[i // s_q] keys)
    (schedule,) = mla_decode_plan_p.bind(jnp.repeat(lens, s_q), rows=num_heads, capacity=topk)
    return MlaDecodePlan(schedule, batch * s_q, num_heads, topk, kind="sparse")
