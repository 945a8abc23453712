"""mla_decode: the public function and its op's whole spec (shape rule, GPU workspace, batching
rule, sharding rule). jaxpaged/_spec.py turns the spec into primitives and lowerings.

Semantics are defined by jaxpaged.reference.mla_decode; see its docstring.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

import numpy as np

from jaxpaged import _checks, _extension, _fp8, _sinks, _spec

LATENT_DIM = 512  # compressed KV width; also the value/output width
ROPE_DIM = 64     # rotary part of the key


OPTION_WORDS = 2  # traced options: scale, kv_scale (float32 bits)
DS_DEQUANT = ("float32", "bfloat16", "float16")  # how 656-byte rows are read (reference._mla_tokens);
# the kernels' ds_read attribute is the index


def check_queries_and_caches(q_nope, q_pe, ckv_cache, kpe_cache):
    """Shape rule of what dense and sparse MLA decode share (queries and caches, every format);
    returns (batch, s_q, num_heads, num_pages, page_size)."""
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
    ds_rows = ckv_cache.dtype == np.uint8
    if not (ds_rows or _fp8.is_fp8(ckv_cache.dtype)):
        _checks.check_same_dtype("ckv_cache", ckv_cache, "q_nope", q_nope)
    num_pages, page_size, width = ckv_cache.shape
    if ds_rows and width != _fp8.DS_ROW_BYTES:
        raise ValueError(f"a uint8 ckv_cache holds DeepSeek-V3.2's 656-byte rows; got shape {ckv_cache.shape}")
    combined = width == LATENT_DIM + ROPE_DIM or ds_rows  # kpe_cache is then ckv_cache again, unread
    if width not in (LATENT_DIM, LATENT_DIM + ROPE_DIM) and not ds_rows:
        raise ValueError(f"ckv_cache's last dim must be 512 (with kpe_cache) or 576 (combined, "
                         f"kpe_cache=None); got shape {ckv_cache.shape}")
    if not combined:
        _checks.check_same_dtype("kpe_cache", kpe_cache, "q_nope", q_nope)
        if kpe_cache.shape != (num_pages, page_size, ROPE_DIM):
            raise ValueError(f"kpe_cache must have shape [num_pages, page_size, 64] = "
                             f"{(num_pages, page_size, ROPE_DIM)}; got {kpe_cache.shape}")
    _checks.check_page_size("ckv_cache", page_size)
    return batch, s_q, num_heads, num_pages, page_size


def cache_dtypes(q_nope, ckv_cache, kpe_cache):
    """The dtypes the GPU workspace size depends on (which kernel reads the cache), as the
    extension's workspace functions take them."""
    return dict(q_dtype=str(q_nope.dtype), ckv_dtype=str(ckv_cache.dtype), kpe_dtype=str(kpe_cache.dtype))


class _MlaDecode(_spec.OpSpec):
    """Operands: q_nope, q_pe, ckv_cache, kpe_cache (ckv_cache again for the combined layout),
    kv_lens, block_tables, options (int32 [2] when an option is traced, read by the kernels from
    the device; else [0]), plan (a schedule from mla_decode_plan, else int32 [0]). Params: scale,
    kv_scale (ignored when options has words), ds_read (656-byte rows: DS_DEQUANT's index), fp8_math
    (fp8 caches: the products may run in fp8), causal, plan_rows / plan_capacity (what the plan was
    made for; 0 without one: the GPU handler uses a plan only for a call of that size).
    Results: out, lse. Caches: q's dtype; fp8 (combined, or the latent with a 16-bit rope cache),
    scaled by kv_scale; or DeepSeek-V3.2's uint8 [.., 656] rows (passed twice, like combined)."""

    name = "mla_decode"

    def abstract_eval(self, q_nope, q_pe, ckv_cache, kpe_cache, kv_lens, block_tables, options, plan, *, scale,
                      kv_scale, ds_read, fp8_math, causal, plan_rows, plan_capacity):
        batch, s_q, num_heads, _, page_size = check_queries_and_caches(q_nope, q_pe, ckv_cache, kpe_cache)
        _checks.check_int32("kv_lens", kv_lens, (batch,), "[B]")
        if block_tables.ndim != 2:
            raise ValueError(f"block_tables must have shape [B, max_pages]; got shape {block_tables.shape}")
        _checks.check_int32("block_tables", block_tables, (batch, block_tables.shape[1]), "[B, max_pages]")
        _checks.check_key_positions("block_tables", block_tables.shape[1], page_size)
        _checks.check_options(options, OPTION_WORDS)
        if plan.dtype != np.int32 or plan.ndim != 1:
            raise ValueError(f"plan must be an int32 vector (jaxpaged.mla_decode_plan); got {plan.dtype} {plan.shape}")
        return (jax.core.ShapedArray(q_nope.shape, q_nope.dtype),
                jax.core.ShapedArray((batch, s_q, num_heads), jnp.float32))

    def workspace_bytes(self, avals_in, params, device):
        q_nope, _, ckv_cache, kpe_cache, _, block_tables = avals_in[:6]
        batch, s_q, num_heads, _ = q_nope.shape
        return _extension.mla_decode_workspace_bytes(
            batch=batch, s_q=s_q, num_heads=num_heads, max_pages=block_tables.shape[1],
            page_size=ckv_cache.shape[1], device=device, ds_read=int(params["ds_read"]),
            fp8_math=int(params["fp8_math"]), **cache_dtypes(q_nope, ckv_cache, kpe_cache))

    def batch(self, args, dims, **params):
        """vmap folds the mapped axis into the batch axis (pages offset when the caches are mapped);
        a traced scale that differs per instance makes one call per instance."""
        # (a plan is for one instance's batch: the folded call makes its own schedule, the same)
        args, dims = (*args[:-1], _no_plan()), (*dims[:-1], None)
        params = dict(params, plan_rows=0, plan_capacity=0)
        if dims[-2] is not None:
            return _spec.map_instances(self.primitive, args, dims, **params)
        options, plan = args[-2:]
        _, (q_nope, q_pe, ckv, kpe, kv_lens, block_tables) = _spec.batched_at_front(args[:-2], dims[:-2])
        n, batch = q_nope.shape[:2]
        (ckv, kpe), block_tables = _spec.stack_caches(
            (ckv, kpe), block_tables, mapped=dims[2] is not None or dims[3] is not None)
        fold = lambda x: x.reshape((n * batch,) + x.shape[2:])
        out, lse = self.primitive.bind(fold(q_nope), fold(q_pe), ckv, kpe, fold(kv_lens), fold(block_tables),
                                       options, plan, **params)
        return (out.reshape((n, batch) + out.shape[1:]), lse.reshape((n, batch) + lse.shape[1:])), (0, 0)

    def sharding_rule(self, avals_in, params):
        """Factors: b sequences, h query heads; the caches and tables' page axis stay whole (every
        device reads the one latent KV head in full; a plan stays whole, and a device's call, smaller
        than the one it was made for, computes its own schedule)."""
        rule = "b q h l, b q h r, p s w, p s v, b, b m, o, z -> b q h l, b q h"
        plan = sequences_and_heads_plan(avals_in[0].shape, lambda seqs: [(seqs,), (seqs, None), (None,), (None,)])
        return rule, {}, ["q", "l", "r", "p", "s", "w", "v", "m", "o", "z"], plan


mla_decode_p = _spec.define(_MlaDecode())


def _no_plan():
    return jnp.zeros(_checks.EMPTY_OPERAND, jnp.int32)


@jax.tree_util.register_pytree_node_class
class MlaDecodePlan:
    """A reusable schedule for the mla_decode calls of one serving step (from mla_decode_plan; kind
    "sparse": mla_decode_sparse's, from mla_decode_sparse_plan): `schedule` is an int32 device array
    (opaque: its layout is the GPU kernels'), the other fields the shapes it was made for. A pytree,
    so it passes through jit, scan and vmap like an array."""

    def __init__(self, schedule, batch: int, rows: int, capacity: int, kind: str = "dense"):
        self.schedule, self.batch, self.rows, self.capacity, self.kind = schedule, batch, rows, capacity, kind

    def tree_flatten(self):
        return (self.schedule,), (self.batch, self.rows, self.capacity, self.kind)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0], *aux)

    def __repr__(self):
        kind = "" if self.kind == "dense" else f", kind={self.kind!r}"
        return f"MlaDecodePlan(batch={self.batch}, rows={self.rows}, capacity={self.capacity}{kind})"


class _MlaDecodePlan(_spec.OpSpec):
    """Operand: kv_lens. Params: rows (s_q x Hq), capacity (max_pages x page_size). Result: the
    schedule, int32 [mla_decode_plan_ints(B)] (zeros on the CPU, which needs none)."""

    name = "mla_decode_plan"
    gpu_dtypes = (np.dtype(np.int32),)

    def abstract_eval(self, kv_lens, *, rows, capacity):
        if kv_lens.ndim != 1:
            raise ValueError(f"kv_lens must have shape [B]; got {kv_lens.shape}")
        _checks.check_int32("kv_lens", kv_lens, kv_lens.shape, "[B]")
        return (jax.core.ShapedArray((_extension.mla_decode_plan_ints(kv_lens.shape[0]),), jnp.int32),)

    def workspace_bytes(self, avals_in, params, device):
        return 0

    def batch(self, args, dims, **params):
        return _spec.map_instances(self.primitive, args, dims, **params)

    def sharding_rule(self, avals_in, params):
        """Computed whole on every device (a few hundred words from kv_lens)."""
        return "b -> z", {}, ["b", "z"], lambda spec_of, fits: ([(None,)], [(None,)])


mla_decode_plan_p = _spec.define(_MlaDecodePlan())


def mla_decode_plan(kv_lens, block_tables, *, num_heads: int, page_size: int, s_q: int = 1) -> MlaDecodePlan:
    """The schedule of mla_decode calls over these kv_lens, made once per serving step and passed
    to every layer's call (`mla_decode(..., plan=plan)`), which then skips computing its own: one
    small kernel per step instead of one per layer on the Hopper path (elsewhere a plan is accepted
    and unused). Results are identical with and without it.

    Args:
      kv_lens: int32 [B], as the calls will get them (the plan is made from their values).
      block_tables: int32 [B, max_pages] (only its shape is read).
      num_heads, page_size, s_q: the calls' Hq, cache page size and query tokens per sequence.

    A plan fits calls with the same B, s_q x Hq and max_pages x page_size (else a ValueError) on
    the same kind of device; jit-, scan- and vmap-safe. Under vmap or a sharded call the GPU
    computes its own schedule (the plan was made for the whole batch), with the same results.
    """
    kv_lens = _checks.index_array("kv_lens", kv_lens)
    shape = jnp.shape(block_tables)
    if len(shape) != 2 or shape[0] != jnp.shape(kv_lens)[0]:
        raise ValueError(f"block_tables must have shape [B, max_pages] with B = len(kv_lens) = "
                         f"{jnp.shape(kv_lens)[0]}; got {shape}")
    for name, value in (("num_heads", num_heads), ("page_size", page_size), ("s_q", s_q)):
        _checks.positive_int(name, value)
    _checks.check_page_size("page_size", page_size)
    _checks.check_key_positions("block_tables", shape[1], page_size)
    rows, capacity = int(s_q) * int(num_heads), int(shape[1]) * int(page_size)
    if rows > np.iinfo(np.int32).max:
        raise ValueError(f"s_q * num_heads must be below 2^31; got {rows}")
    (schedule,) = mla_decode_plan_p.bind(kv_lens, rows=rows, capacity=capacity)
    return MlaDecodePlan(schedule, int(shape[0]), rows, capacity)


def _plan_operands(plan, batch, rows, capacity, kind="dense", names=("B", "s_q x Hq", "max_pages x page_size")):
    """The plan operand and params of an mla_decode call (none when plan is None); mla_decode_sparse's
    with kind "sparse" and the names of what its plans are made for (lists, rows per list, topk)."""
    makers = {"dense": "jaxpaged.mla_decode_plan", "sparse": "jaxpaged.mla_decode_sparse_plan"}
    if plan is None:
        return _no_plan(), dict(plan_rows=0, plan_capacity=0)
    if not isinstance(plan, MlaDecodePlan):
        raise ValueError(f"plan must come from {makers[kind]}; got {type(plan).__name__}")
    if plan.kind != kind:
        raise ValueError(f"plan must come from {makers[kind]}; got a plan from {makers[plan.kind]}")
    if (plan.batch, plan.rows, plan.capacity) != (batch, rows, capacity):
        made = ", ".join(f"{n}={v}" for n, v in zip(names, (plan.batch, plan.rows, plan.capacity)))
        call = ", ".join(f"{n}={v}" for n, v in zip(names, (batch, rows, capacity)))
        raise ValueError(f"plan was made for {made}; this call has {call}")
    return plan.schedule, dict(plan_rows=rows, plan_capacity=capacity)


def mla_decode(q_nope, q_pe, ckv_cache, kpe_cache, kv_lens, block_tables, *, scale, causal=False, sinks=None,
               kv_scale=None, plan=None, ds_dequant="float32", fp8_math=False):
    """DeepSeek multi-head latent attention decode over a paged latent cache.

    Args:
      q_nope: [B, s_q, Hq, 512] query in the latent space (q's nope part absorbed through W_UK).
      q_pe: [B, s_q, Hq, 64] rotary part of the query.
      ckv_cache: [num_pages, page_size, 512] latent cache with kpe_cache [num_pages, page_size, 64],
        or the combined [num_pages, page_size, 576] layout (latent then rope) with kpe_cache=None.
        Quantized caches: float8_e4m3fn (or e5m2) combined, or an fp8 latent cache with a 16-bit
        kpe_cache, read as value * kv_scale; or DeepSeek-V3.2's uint8 [num_pages, page_size, 656]
        rows with kpe_cache=None (jaxpaged.write_mla_kv writes all of them). On a Hopper GPU the
        tensor-core kernel reads 16-bit caches, fp8 combined caches and (with
        ds_dequant="bfloat16") 656-byte rows; the rest runs the portable CUDA-core kernel
        (correct, far slower).
      kv_lens: int32 [B]; block_tables: int32 [B, max_pages].
      scale: score scale (required: MLA's softmax scale uses the pre-absorption head dim); a Python
        number or a traced scalar (read by the kernels on the device).
      causal: query i of s_q sees keys j <= kv_len - s_q + i (speculative / MTP decoding).
      sinks: float [Hq] or None: attention sinks, as in paged_attention (lse excludes them).
      kv_scale: fp8 caches only: per-tensor scale (default 1.0; a Python number or traced scalar).
      plan: None, or mla_decode_plan(kv_lens, block_tables, ...) made for these kv_lens (once per
        serving step for all layers); the results are the same either way.
      ds_dequant: how 656-byte rows are read: "float32" (each e4m3 value times its group's scale,
        exactly), "bfloat16" (that product rounded to bfloat16 first, as FlashMLA's kernels read
        the format; not with float16 queries) or "float16" (the scale rounded to float16, then the
        product: within 2^-10 of its size of the exact value where the scale is at least 2^-14 and
        the value at most 65504; smaller scales lose bits as float16 subnormals, larger values
        read as +-inf). With bfloat16 queries the last two run fast on Hopper GPUs, "float16"
        fastest (float16 tensor cores: one multiply per two values where "bfloat16" takes six
        instructions).
      fp8_math: fp8 caches (float8_e4m3fn / e5m2, or 656-byte rows) only: allow the kernels to compute in fp8, as
        FlashMLA's fp8 decode does - each query row rounded to e4m3 at a power-of-two scale (its
        largest |value| into (224, 448], for rows whose largest |value| is above 2^-118) and the
        probabilities rounded to e4m3 before the P.V product; the scores' and each tile's P.V
        sums then run in the fp8 tensor cores' accumulators (about 13 significant bits), the
        softmax and the sums across tiles in float32. On Hopper GPUs the wide fp8 kernel
        (bfloat16 queries, more than 16 query rows per sequence, the combined cache in pages of
        >= 64 tokens) then runs its fp8 mode (half the tensor-core instruction cycles); every
        other path computes exactly as without it. Against the reference over the rounded
        queries, an output moves by at most 2^-4 of the probability-weighted |values| it averages
        plus smaller terms (e4m3 subnormals, the fp8 sums: tests/fp8_math_checks.py's
        fp8_math_bound).
        656-byte rows on Hopper (dense, pages of >= 64 tokens, bfloat16 queries, any number of
        query rows) run the wide kernel's fp8 mode for them: the latent queries rounded so, the
        rope's products in bf16, the probabilities rounded to e4m3 once per latent group as
        p x group scale x 2^-E (a power of two per group); elsewhere they are read as ds_dequant
        says. A Python bool.

    Returns:
      (out [B, s_q, Hq, 512] in q's dtype, lse [B, s_q, Hq] float32). Exact rule:
      jaxpaged.reference.mla_decode.
    """
    if _checks.is_traced(causal):
        raise ValueError("causal must be a Python bool, not a traced value: mark it static, e.g. "
                         "jax.jit(f, static_argnames=('causal',))")
    fp8_math = check_fp8_math(fp8_math, ckv_cache)
    kv_lens = _checks.index_array("kv_lens", kv_lens)
    block_tables = _checks.index_array("block_tables", block_tables, out_of_range=-1)
    kpe_cache, options, attrs, sinks = prepare(q_nope, ckv_cache, kpe_cache, scale, kv_scale, sinks, "mla_decode",
                                               ds_dequant)
    batch, s_q, num_heads = (jnp.shape(q_nope) + (0, 0, 0))[:3]
    capacity = (jnp.shape(block_tables) + (0, 0))[1] * (jnp.shape(ckv_cache) + (0, 0))[1]
    plan, plan_attrs = _plan_operands(plan, batch, s_q * num_heads, capacity)
    out, lse = mla_decode_p.bind(q_nope, q_pe, ckv_cache, kpe_cache, kv_lens, block_tables, options, plan,
                                 causal=bool(causal), fp8_math=int(fp8_math), **attrs, **plan_attrs)
    return (out, lse) if sinks is None else (_sinks.apply_sinks(out, lse, sinks), lse)


def sequences_and_heads_plan(q_shape, rest):
    """The sharding plan of an MLA op: sequences and query heads as the partitioner proposes them
    for q_nope (when they split evenly and differ), the caches whole; rest(seqs) gives the specs of
    the operands after the caches."""
    batch, _, num_heads, _ = q_shape

    def plan(spec_of, fits):
        seqs, heads = spec_of(0, 0), spec_of(0, 2)
        if seqs is not None and not fits(seqs, batch):
            seqs = None
        if heads is not None and (heads == seqs or not fits(heads, num_heads)):
            heads = None
        q_spec = (seqs, None, heads, None)
        cache = (None, None, None)
        return [q_spec, q_spec, cache, cache, *rest(seqs)], [q_spec, (seqs, None, heads)]
    return plan


def prepare(q_nope, ckv_cache, kpe_cache, scale, kv_scale, sinks, op: str, ds_dequant="float32"):
    """The arguments dense and sparse MLA decode share, checked and as their primitives take them:
    (kpe_cache - ckv_cache again for a combined or 656-byte cache -, options operand,
    {scale, kv_scale, ds_read} attributes, sinks)."""
    ds_read = check_ds_dequant(ds_dequant, q_nope, ckv_cache)
    if scale is None:
        raise ValueError(f"scale is required for {op} (e.g. 1/sqrt(128 + 64) for DeepSeek-V3)")
    traced = _checks.any_traced(scale, kv_scale)
    scale = _checks.option("scale", scale)
    if kv_scale is not None and not _fp8.is_fp8(jnp.result_type(ckv_cache)):
        raise ValueError(f"kv_scale applies to fp8 caches only; ckv_cache is {jnp.result_type(ckv_cache)}")
    kv_scale = 1.0 if kv_scale is None else _checks.option("kv_scale", kv_scale)
    combined = jnp.shape(ckv_cache)[-1:] in ((LATENT_DIM + ROPE_DIM,), (_fp8.DS_ROW_BYTES,))
    if kpe_cache is None:
        if not combined:
            raise ValueError(f"ckv_cache must be [num_pages, page_size, 576] (or uint8 [.., 656]) when "
                             f"kpe_cache is None; got shape {jnp.shape(ckv_cache)}")
        # Combined layout: the same buffer goes in twice; the kernel addresses its rope part in place.
        kpe_cache = ckv_cache
    elif combined:
        raise ValueError(f"kpe_cache must be None when ckv_cache holds the rope too (combined [.., 576] or "
                         f"656-byte rows); got ckv_cache of shape {jnp.shape(ckv_cache)}")
    if sinks is not None:
        sinks = _sinks.check_sinks(sinks, jnp.shape(q_nope)[2] if jnp.ndim(q_nope) == 4 else -1)
    if traced:  # the attributes are then unused
        return kpe_cache, _checks.option_words(scale, kv_scale), dict(scale=0.0, kv_scale=0.0, ds_read=ds_read), sinks
    return (kpe_cache, jnp.zeros(_checks.EMPTY_OPERAND, jnp.int32), dict(scale=scale, kv_scale=kv_scale, ds_read=ds_read),
            sinks)


def check_fp8_math(fp8_math, ckv_cache) -> bool:
    """fp8_math (dense and sparse MLA decode) checked against the cache; returns it as a bool."""
    fp8_math = _checks.static_bool("fp8_math", fp8_math)
    if fp8_math and not (_fp8.is_fp8(jnp.result_type(ckv_cache)) or jnp.result_type(ckv_cache) == jnp.uint8):
        raise ValueError(f"fp8_math applies to fp8 caches (float8_e4m3fn / float8_e5m2, or 656-byte rows); "
                         f"ckv_cache is {jnp.result_type(ckv_cache)}")
    return fp8_math


def check_ds_dequant(ds_dequant, q_nope, ckv_cache) -> int:
    """ds_dequant checked against the call; returns the ds_read attribute (its index in DS_DEQUANT)."""
    if not isinstance(ds_dequant, str) or ds_dequant not in DS_DEQUANT:
        raise ValueError(f"ds_dequant must be one of {DS_DEQUANT}; got {ds_dequant!r}")
    if ds_dequant == "float32":
        return 0
    if jnp.result_type(ckv_cache) != jnp.uint8:
        raise ValueError(f"ds_dequant={ds_dequant!r} applies to DeepSeek-V3.2's uint8 [.., 656] rows only; "
                         f"ckv_cache is {jnp.result_type(ckv_cache)}")
    if ds_dequant == "bfloat16" and jnp.result_type(q_nope) == jnp.float16:  # (bf16 values in float16)
        raise ValueError("ds_dequant='bfloat16' needs bfloat16 (or float32) queries; q_nope is float16")
    return DS_DEQUANT.index(ds_dequant)
