"""paged_attention: the public function and its op's whole spec (shape rule, GPU workspace,
batching rule, sharding rule). jaxpaged/_spec.py turns the spec into primitives and lowerings.

Semantics are defined by jaxpaged.reference.paged_attention; see its docstring.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxpaged import _checks, _extension, _fp8, _sinks, _spec

SUPPORTED_HEAD_DIMS = (64, 128, 256)
KV_LAYOUTS = {"NHD": 0, "HND": 1}


def _cache_dims(k_shape, kv_layout: int):
    """(num_pages, page_size, num_kv_heads, head_dim) of a cache shape in either layout."""
    if kv_layout == KV_LAYOUTS["HND"]:
        num_pages, num_kv_heads, page_size, head_dim = k_shape
    else:
        num_pages, page_size, num_kv_heads, head_dim = k_shape
    return num_pages, page_size, num_kv_heads, head_dim


OPTION_WORDS = 5  # traced options: scale, soft_cap (float32 bits), sliding_window, k_scale, v_scale


class _PagedAttention(_spec.OpSpec):
    """Operands: q, k_cache, v_cache, kv_lens, block_tables, cu_q_lens (empty for pure decode,
    whose row t is sequence t), options (int32 [5] when any option is traced, read by the kernels from the
    device; else [0]), plan (a tile list from paged_attention_plan, else int32 [0]). Params: scale,
    soft_cap (0: none), sliding_window (0: none), k_scale, v_scale (fp8 caches) - ignored when
    options has words -, kv_layout (0: NHD, 1: HND), decode_only, plan_tokens / plan_group /
    plan_capacity (what the plan was made for; plan_group 0 without one: the GPU handler uses a plan
    only for a call of that shape). Results: out, lse."""

    name = "paged_attention"

    def abstract_eval(self, q, k_cache, v_cache, kv_lens, block_tables, cu_q_lens, options, plan, *, scale,
                      soft_cap, sliding_window, k_scale, v_scale, kv_layout, decode_only, plan_tokens,
                      plan_group, plan_capacity):
        layout = "[num_pages, page_size, Hkv, D]" if kv_layout == 0 else "[num_pages, Hkv, page_size, D]"
        _checks.check_rank("q", q, 3, "[T, Hq, D]")
        _checks.check_float("q", q)
        _checks.check_rank("k_cache", k_cache, 4, layout)
        if not _fp8.is_fp8(k_cache.dtype):
            _checks.check_same_dtype("k_cache", k_cache, "q", q)
        _checks.check_same_dtype("v_cache", v_cache, "k_cache", k_cache)
        if v_cache.shape != k_cache.shape:
            raise ValueError(f"v_cache must have the shape of k_cache {k_cache.shape}; got {v_cache.shape}")
        num_tokens, num_q_heads, head_dim = q.shape
        _, page_size, num_kv_heads, cache_head_dim = _cache_dims(k_cache.shape, kv_layout)
        if head_dim not in SUPPORTED_HEAD_DIMS:
            raise ValueError(f"q: head dim must be one of {SUPPORTED_HEAD_DIMS}; got {head_dim}")
        if cache_head_dim != head_dim:
            raise ValueError(f"k_cache: head dim must match q's {head_dim}; got {cache_head_dim} "
                             f"(shape {k_cache.shape}, layout {layout})")
        if num_kv_heads < 1 or num_q_heads % num_kv_heads:
            raise ValueError(f"q: num_q_heads ({num_q_heads}) must be a multiple of the caches' "
                             f"num_kv_heads ({num_kv_heads})")
        _checks.check_page_size("k_cache", page_size)
        if kv_lens.ndim != 1:
            raise ValueError(f"kv_lens must have shape [S]; got shape {kv_lens.shape}")
        num_seqs = kv_lens.shape[0]
        _checks.check_int32("kv_lens", kv_lens, (num_seqs,), "[S]")
        if block_tables.ndim != 2:
            raise ValueError(f"block_tables must have shape [S, max_pages]; got shape {block_tables.shape}")
        _checks.check_int32("block_tables", block_tables, (num_seqs, block_tables.shape[1]), "[S, max_pages]")
        _checks.check_key_positions("block_tables", block_tables.shape[1], page_size)
        _checks.check_int32("cu_q_lens", cu_q_lens, (0,) if decode_only else (num_seqs + 1,),
                            "[0] (pure decode)" if decode_only else "[S + 1]")
        _checks.check_options(options, OPTION_WORDS)
        if plan.dtype != np.int32 or plan.ndim != 1:
            raise ValueError(f"plan must be an int32 vector (jaxpaged.paged_attention_plan); got "
                             f"{plan.dtype} {plan.shape}")
        if decode_only and num_tokens != num_seqs:
            raise ValueError(f"q: without cu_q_lens (pure decode) q must have one row per sequence: "
                             f"T ({num_tokens}) must equal len(kv_lens) ({num_seqs})")
        return (jax.core.ShapedArray(q.shape, q.dtype),
                jax.core.ShapedArray((num_tokens, num_q_heads), jnp.float32))

    def workspace_bytes(self, avals_in, params, device):
        q, k_cache, _, kv_lens, block_tables = avals_in[:5]
        num_tokens, num_q_heads, head_dim = q.shape
        _, page_size, num_kv_heads, _ = _cache_dims(k_cache.shape, params["kv_layout"])
        return _extension.paged_attention_workspace_bytes(
            num_tokens=num_tokens, num_q_heads=num_q_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
            num_seqs=kv_lens.shape[0], max_pages=block_tables.shape[1], page_size=page_size, device=device)

    def batch(self, args, dims, *, decode_only, kv_layout, **params):
        """vmap folds the mapped axis into the token and sequence axes: one call, no Python loop.

        Instance i's sequences keep their own rows, and when the caches are mapped, its pages are
        offset by i * num_pages in the stacked cache. In a ragged call each instance gets one extra
        empty sequence (kv_len 0) that owns its padding rows, so they stay padding. Options that
        differ per instance (traced options with a mapped axis) make one call per instance.
        """
        # (a plan is for one instance's call: the folded call lists its own tiles, the same ones)
        args, dims = (*args[:-1], _no_plan()), (*dims[:-1], None)
        params = dict(params, plan_tokens=0, plan_group=0, plan_capacity=0)
        if dims[-2] is not None:
            return _spec.map_instances(self.primitive, args, dims, decode_only=decode_only,
                                       kv_layout=kv_layout, **params)
        options, plan = args[-2:]
        _, (q, k_cache, v_cache, kv_lens, block_tables, cu_q_lens) = _spec.batched_at_front(args[:-2], dims[:-2])
        n, num_tokens = q.shape[:2]
        num_seqs = kv_lens.shape[1]
        (k_cache, v_cache), block_tables = _spec.stack_caches(
            (k_cache, v_cache), block_tables, mapped=dims[1] is not None or dims[2] is not None)
        if not decode_only:
            cu = jnp.clip(cu_q_lens, 0, num_tokens) + (jnp.arange(n, dtype=jnp.int32) * num_tokens)[:, None]
            cu_q_lens = jnp.concatenate([cu.reshape(-1), jnp.array([n * num_tokens], jnp.int32)])
            kv_lens = jnp.pad(kv_lens, ((0, 0), (0, 1)))
            block_tables = jnp.pad(block_tables, ((0, 0), (0, 1), (0, 0)))
            num_seqs += 1
        else:
            cu_q_lens = _no_cu_q_lens()
        out, lse = self.primitive.bind(
            q.reshape((n * num_tokens,) + q.shape[2:]), k_cache, v_cache, kv_lens.reshape(-1),
            block_tables.reshape(n * num_seqs, -1), cu_q_lens, options, plan, decode_only=decode_only,
            kv_layout=kv_layout, **params)
        return (out.reshape((n, num_tokens) + out.shape[1:]), lse.reshape((n, num_tokens, -1))), (0, 0)

    def sharding_rule(self, avals_in, params):
        """Factors: t tokens (= sequences b in pure decode), k KV heads, g heads per KV head. Heads
        split in whole GQA groups with the caches' KV-head axis; pure decode also splits sequences.
        A plan stays whole: a device's call with a share of the KV heads has the plan's rows,
        sequences and group (it reads the plan); one with a share of the sequences lists its own."""
        q, k_cache = avals_in[0], avals_in[1]
        nhd = params["kv_layout"] == 0
        num_kv_heads = k_cache.shape[2] if nhd else k_cache.shape[1]
        group = q.shape[1] // num_kv_heads
        decode = params["decode_only"]
        b = "t" if decode else "b"
        cache = "p s k d" if nhd else "p k s d"
        rule = f"t (k g) d, {cache}, {cache}, {b}, {b} m, c, o, z -> t (k g) d, t (k g)"
        whole = ["g", "p", "s", "d", "m", "c", "o", "z"] + ([] if decode else ["t", "b"])
        kv_dim = 2 if nhd else 1
        num_seqs = avals_in[3].shape[0]

        def plan(spec_of, fits):
            heads = spec_of(1, kv_dim) or spec_of(0, 1)
            if heads is not None and not fits(heads, num_kv_heads):
                heads = None
            seqs = spec_of(0, 0) if decode else None
            if seqs is not None and (seqs == heads or not fits(seqs, num_seqs)):
                seqs = None
            cache_spec = (None, None, heads, None) if nhd else (None, heads, None, None)
            ins = [(seqs, heads, None), cache_spec, cache_spec, (seqs,), (seqs, None), (None,), (None,), (None,)]
            return ins, [(seqs, heads, None), (seqs, heads)]
        return rule, {"g": group}, whole, plan



def _no_cu_q_lens():
    """Pure decode's cu_q_lens operand: empty (an arange would cost a kernel launch per call)."""
    return jnp.zeros(_checks.EMPTY_OPERAND, jnp.int32)


def _no_plan():
    return jnp.zeros(_checks.EMPTY_OPERAND, jnp.int32)


paged_attention_p = _spec.define(_PagedAttention())


@jax.tree_util.register_pytree_node_class
class PagedAttentionPlan:
    """A reusable tile list for the paged_attention calls of one serving step (from
    paged_attention_plan): `tiles` is an int32 device array (opaque: its layout is the GPU kernels'),
    the other fields the shapes it was made for. A pytree, so it passes through jit, scan and vmap
    like an array."""

    def __init__(self, tiles, num_tokens: int, num_seqs: int, group: int, capacity: int, decode_only: bool):
        self.tiles = tiles
        self.num_tokens, self.num_seqs, self.group = num_tokens, num_seqs, group
        self.capacity, self.decode_only = capacity, decode_only

    def tree_flatten(self):
        return (self.tiles,), (self.num_tokens, self.num_seqs, self.group, self.capacity, self.decode_only)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0], *aux)

    def _shape(self):
        return (self.num_tokens, self.num_seqs, self.group, self.capacity, self.decode_only)

    def __repr__(self):
        return (f"PagedAttentionPlan(num_tokens={self.num_tokens}, num_seqs={self.num_seqs}, group={self.group}, "
                f"capacity={self.capacity}, decode_only={self.decode_only})")


class _PagedAttentionPlan(_spec.OpSpec):
    """Operands: kv_lens, cu_q_lens (empty for pure decode). Params: num_tokens, group (query heads
    per KV head), capacity (max_pages x page_size), decode_only. Result: the tile list, int32
    [paged_attention_plan_ints(T, group, S)] (zeros on the CPU, which needs none)."""

    name = "paged_attention_plan"
    gpu_dtypes = (np.dtype(np.int32),)

    def abstract_eval(self, kv_lens, cu_q_lens, *, num_tokens, group, capacity, decode_only):
        if kv_lens.ndim != 1:
            raise ValueError(f"kv_lens must have shape [S]; got {kv_lens.shape}")
        num_seqs = kv_lens.shape[0]
        _checks.check_int32("kv_lens", kv_lens, (num_seqs,), "[S]")
        _checks.check_int32("cu_q_lens", cu_q_lens, (0,) if decode_only else (num_seqs + 1,),
                            "[0] (pure decode)" if decode_only else "[S + 1]")
        words = _extension.paged_attention_plan_ints(num_tokens=num_tokens, group=group, num_seqs=num_seqs)
        return (jax.core.ShapedArray((words,), jnp.int32),)

    def workspace_bytes(self, avals_in, params, device):
        return 0

    def batch(self, args, dims, **params):
        return _spec.map_instances(self.primitive, args, dims, **params)

    def sharding_rule(self, avals_in, params):
        """Computed whole on every device (one block's work from kv_lens and cu_q_lens)."""
        return "s, c -> z", {}, ["s", "c", "z"], lambda spec_of, fits: ([(None,), (None,)], [(None,)])


paged_attention_plan_p = _spec.define(_PagedAttentionPlan())


def _normalized_cu_q_lens(cu_q_lens, num_tokens: int):
    """The one rule for cu_q_lens (jaxpaged.reference states it too): clamped to [0, T], then made
    non-decreasing; a decreasing entry gives an empty sequence."""
    cu_q_lens = _checks.index_array("cu_q_lens", cu_q_lens)
    if cu_q_lens.ndim == 1 and cu_q_lens.shape[0] > 0:
        cu_q_lens = jax.lax.cummax(jnp.clip(cu_q_lens, 0, num_tokens))
    return cu_q_lens


def paged_attention_plan(kv_lens, block_tables, cu_q_lens=None, *, num_q_heads: int, num_kv_heads: int,
                         page_size: int, num_tokens: int | None = None) -> PagedAttentionPlan:
    """The tile list of paged_attention calls over these sequences, made once per serving step and
    passed to every layer's call (`paged_attention(..., plan=plan)`), which then skips listing its
    own: one small kernel per step instead of one per layer on the tensor-core path (elsewhere a
    plan is accepted and unused). Results are identical with and without it.

    Args:
      kv_lens: int32 [S], as the calls will get them (they order the work, longest first).
      block_tables: int32 [S, max_pages] (only its shape is read).
      cu_q_lens: int32 [S + 1] as the calls will get them, or None for pure decode. Which tiles
        exist depends on these values: a plan made from other cu_q_lens leaves rows unwritten
        (never an access out of bounds).
      num_q_heads, num_kv_heads, page_size: the calls' Hq, Hkv and cache page size.
      num_tokens: the calls' query rows T (q.shape[0]); required with cu_q_lens (pure decode: S).

    A plan fits calls with the same T, S, Hq / Hkv, max_pages x page_size and cu_q_lens-or-not (else
    a ValueError); jit-, scan- and vmap-safe. Under vmap, or a sharded call with a share of the
    sequences, the GPU lists its own tiles (the same results); a call with a share of the KV heads
    reads the plan.
    """
    kv_lens = _checks.index_array("kv_lens", kv_lens)
    shape = jnp.shape(block_tables)
    if len(shape) != 2 or jnp.ndim(kv_lens) != 1 or shape[0] != jnp.shape(kv_lens)[0]:
        raise ValueError(f"block_tables must have shape [S, max_pages] with S = len(kv_lens) = "
                         f"{jnp.shape(kv_lens)[0] if jnp.ndim(kv_lens) else None}; got {shape}")
    num_seqs = int(shape[0])
    num_q_heads = _checks.positive_int("num_q_heads", num_q_heads)
    num_kv_heads = _checks.positive_int("num_kv_heads", num_kv_heads)
    page_size = _checks.positive_int("page_size", page_size)
    if num_q_heads % num_kv_heads:
        raise ValueError(f"num_q_heads ({num_q_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
    _checks.check_page_size("page_size", page_size)
    _checks.check_key_positions("block_tables", shape[1], page_size)
    decode_only = cu_q_lens is None
    if decode_only:
        if num_tokens is not None and num_tokens != num_seqs:
            raise ValueError(f"num_tokens must be len(kv_lens) = {num_seqs} for pure decode (cu_q_lens=None); "
                             f"got {num_tokens}")
        num_tokens, cu_q_lens = num_seqs, _no_cu_q_lens()
    else:
        if num_tokens is None:
            raise ValueError("num_tokens (the calls' q.shape[0]) is required with cu_q_lens")
        if not isinstance(num_tokens, (int, np.integer)) or isinstance(num_tokens, bool) or num_tokens < 0:
            raise ValueError(f"num_tokens must be a Python int >= 0; got {num_tokens!r}")
        num_tokens = int(num_tokens)
        cu_q_lens = _normalized_cu_q_lens(cu_q_lens, num_tokens)
    group, capacity = num_q_heads // num_kv_heads, int(shape[1]) * page_size
    if num_tokens * group >= 2**31:
        raise ValueError(f"num_tokens * (num_q_heads / num_kv_heads) must be below 2^31; got {num_tokens * group}")
    (tiles,) = paged_attention_plan_p.bind(kv_lens, cu_q_lens, num_tokens=num_tokens, group=group,
                                           capacity=capacity, decode_only=decode_only)
    return PagedAttentionPlan(tiles, num_tokens, num_seqs, group, capacity, decode_only)


def _plan_operands(plan, shape):
    """The plan operand and params of a paged_attention call (none when plan is None); shape:
    (T, S, group, capacity, decode_only) of the call."""
    if plan is None:
        return _no_plan(), dict(plan_tokens=0, plan_group=0, plan_capacity=0)
    if not isinstance(plan, PagedAttentionPlan):
        raise ValueError(f"plan must come from jaxpaged.paged_attention_plan; got {type(plan).__name__}")
    if plan._shape() != shape:
        names = "T, S, Hq / Hkv, max_pages x page_size, pure decode"
        raise ValueError(f"plan was made for ({names}) = {plan._shape()}; this call has {shape}")
    return plan.tiles, dict(plan_tokens=shape[0], plan_group=shape[2], plan_capacity=shape[3])


def paged_attention(q, k_cache, v_cache, kv_lens, block_tables, cu_q_lens=None, *, scale=None,
                    soft_cap=None, sliding_window=None, kv_layout="NHD", return_lse=False, sinks=None,
                    k_scale=None, v_scale=None, plan=None):
    """Attention of query tokens over a paged KV cache (GQA/MQA/MHA; decode and chunked prefill).

    Args:
      q: [T, Hq, D] query rows, bfloat16/float16 (GPU) or also float32 (CPU).
      k_cache, v_cache: [num_pages, page_size, Hkv, D] ("NHD") or [num_pages, Hkv, page_size, D]
        ("HND"), q's dtype or fp8 (float8_e4m3fn / float8_e5m2). Hq must be a
        multiple of Hkv; D one of 64, 128, 256.
      kv_lens: int32 [S], tokens in each sequence's cache (including the query chunk's own).
      block_tables: int32 [S, max_pages], the cache pages of each sequence in order.
      cu_q_lens: int32 [S + 1] cumulative query rows per sequence, or None for pure decode
        (T == S: row s is sequence s's single new token).
      scale: score scale, default 1/sqrt(D). soft_cap: if set, scores become c*tanh(s/c).
      sliding_window: if set to W, a query at position P sees keys in (P - W, P].
        scale, soft_cap and sliding_window may be Python numbers (checked here) or traced scalars
        (a plain jax.jit, or per-layer values in a lax.scan), which the kernels read on the
        device: a traced soft_cap that is not positive and finite means no cap, and a traced
        sliding_window below 1 means no window (so a scan can mix global and windowed layers).
      kv_layout: "NHD" or "HND". return_lse: also return the log-sum-exp [T, Hq] float32.
      k_scale, v_scale: fp8 caches only: a key is k_cache.astype(float32) * k_scale, a value
        likewise with v_scale (default 1.0; Python numbers or traced scalars).
      sinks: float [Hq] or None: attention sinks, a per-head logit added to each row's softmax
        denominator (a key with that score and a zero value); the returned lse excludes it.
      plan: None, or paged_attention_plan(kv_lens, block_tables, cu_q_lens, ...) made for these
        sequences (once per serving step for all layers); the results are the same either way.

    Returns:
      out [T, Hq, D] in q's dtype, or (out, lse) with return_lse=True. The exact rule for which
      keys each row sees, and for padding rows, is in jaxpaged.reference.paged_attention.
    """
    if kv_layout not in KV_LAYOUTS:
        raise ValueError(f"kv_layout must be 'NHD' or 'HND'; got {kv_layout!r}")
    traced = _checks.any_traced(scale, soft_cap, sliding_window, k_scale, v_scale)
    soft_cap = 0.0 if soft_cap is None else _checks.option("soft_cap", soft_cap, positive=True)
    window = 0 if sliding_window is None else _checks.option("sliding_window", sliding_window, integer=True)
    q = jnp.asarray(q)
    if q.ndim != 3:
        raise ValueError(f"q must have shape [T, Hq, D] (rank 3); got shape {q.shape}")
    if q.shape[-1] not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"q: head dim must be one of {SUPPORTED_HEAD_DIMS}; got {q.shape[-1]}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else _checks.option("scale", scale)
    fp8 = _fp8.is_fp8(jnp.result_type(k_cache))
    for name, value in (("k_scale", k_scale), ("v_scale", v_scale)):
        if value is not None and not fp8:
            raise ValueError(f"{name} applies to fp8 caches only; k_cache is {jnp.result_type(k_cache)}")
    k_scale = 1.0 if k_scale is None else _checks.option("k_scale", k_scale)
    v_scale = 1.0 if v_scale is None else _checks.option("v_scale", v_scale)
    kv_lens = _checks.index_array("kv_lens", kv_lens)
    block_tables = _checks.index_array("block_tables", block_tables, out_of_range=-1)
    decode_only = cu_q_lens is None
    cu_q_lens = _no_cu_q_lens() if decode_only else _normalized_cu_q_lens(cu_q_lens, q.shape[0])
    if sinks is not None:
        sinks = _sinks.check_sinks(sinks, q.shape[1])
    if traced:
        soft_cap = jnp.where((soft_cap > 0) & jnp.isfinite(soft_cap), soft_cap, 0.0)  # else: no cap
        options = _checks.option_words(scale, soft_cap, window, k_scale, v_scale)
        scale, soft_cap, window, k_scale, v_scale = 0.0, 0.0, 0, 0.0, 0.0  # the attributes are unused
    else:
        options = jnp.zeros(_checks.EMPTY_OPERAND, jnp.int32)
    plan, plan_attrs = _plan_operands(plan, _call_shape(q, k_cache, kv_lens, block_tables, kv_layout, decode_only))
    out, lse = paged_attention_p.bind(
        q, k_cache, v_cache, kv_lens, block_tables, cu_q_lens, options, plan, scale=scale, soft_cap=soft_cap,
        sliding_window=window, k_scale=k_scale, v_scale=v_scale, kv_layout=KV_LAYOUTS[kv_layout],
        decode_only=decode_only, **plan_attrs)
    if sinks is not None:
        out = _sinks.apply_sinks(out, lse, sinks)
    return (out, lse) if return_lse else out


def _call_shape(q, k_cache, kv_lens, block_tables, kv_layout: str, decode_only: bool):
    """(T, S, group, capacity, decode_only) of a call, as far as its shapes allow (the primitive's
    shape rule reports what is wrong with them)."""
    k_shape = jnp.shape(k_cache)
    _, page_size, num_kv_heads, _ = _cache_dims(k_shape, KV_LAYOUTS[kv_layout]) if len(k_shape) == 4 else (0,) * 4
    group = q.shape[1] // num_kv_heads if num_kv_heads else 0
    max_pages = jnp.shape(block_tables)[1] if jnp.ndim(block_tables) == 2 else 0
    num_seqs = jnp.shape(kv_lens)[0] if jnp.ndim(kv_lens) == 1 else 0
    return (q.shape[0], num_seqs, group, max_pages * page_size, decode_only)
