"""Sharding rules: how an op runs when jit partitions its operands over a device mesh.

Each op has an outer primitive (shape rule, batching rule; what users bind) and an inner one
(the FFI lowerings). The outer one lowers through `custom_partitioning` to the inner one, so the
partitioner can run the op on each device's shard instead of gathering whole operands first. On
one device the outer call lowers straight to the inner FFI call (the same HLO as without these
rules); inside `shard_map`, custom_partitioning itself inlines it.

What may be sharded (everything else is replicated before the call):
- query heads with their KV heads (tensor parallelism): paged_attention shards q's head axis in
  blocks of whole GQA groups together with the caches' KV-head axis; mla_decode shards q's head
  axis (its one latent KV head is read in full by every device);
- sequences (data parallelism) of pure decode and of mla_decode: q's rows with kv_lens and
  block_tables. The caches' page axis stays whole, since page ids index the whole cache. Ragged
  paged_attention (cu_q_lens given) keeps its tokens and sequences whole.
Each device then attends its own heads and sequences; no collective is needed after the call.
A split that does not divide its dimension evenly (say 4 devices over 2 KV heads) is not used:
that dimension is computed whole (the partitioner gathers it first).
"""

from __future__ import annotations

import math
import re

from jax.experimental.custom_partitioning import custom_partitioning
from jax.extend.core import Primitive
from jax.interpreters import mlir
from jax.sharding import NamedSharding, PartitionSpec


def register_partitioned_lowering(outer: Primitive, inner: Primitive, rule) -> None:
    """Lowers `outer` to `inner` through custom_partitioning, on every platform.

    rule(avals_in, params) -> (sharding_rule string, factor sizes, factors that stay whole, plan)
    where plan(spec_of, fits) -> (operand specs, result specs) picks the specs the op runs with:
    spec_of(i, dim) is the mesh axis (or None) of operand i's dim in the partitioner's proposal,
    fits(axis, n) whether that axis splits n evenly (an axis that does not is not used: the
    dimension is computed whole instead of in uneven or padded pieces).
    """

    def lowering(ctx, *args, **params):
        if not _partitioned(ctx):  # one device (or pmap): the plain FFI call, nothing to split
            return mlir.lower_fun(lambda *a: tuple(inner.bind(*a, **params)), multiple_results=True)(
                ctx, *args)
        rule_str, sizes, whole, plan = rule(ctx.avals_in, params)

        @custom_partitioning
        def op(*operands):
            return tuple(inner.bind(*operands, **params))

        def run(mesh, arg_shapes):
            def spec_of(i, dim):
                sharding = arg_shapes[i].sharding
                spec = tuple(sharding.spec) if isinstance(sharding, NamedSharding) else ()
                axis = spec[dim] if dim < len(spec) else None
                names = axis if isinstance(axis, tuple) else (axis,)
                return axis if axis is not None and all(n in mesh.shape for n in names) else None

            def fits(axis, n):
                names = axis if isinstance(axis, tuple) else (axis,)
                return n % math.prod(mesh.shape[a] for a in names) == 0
            in_specs, out_specs = plan(spec_of, fits)
            return ([NamedSharding(mesh, PartitionSpec(*s)) for s in in_specs],
                    [NamedSharding(mesh, PartitionSpec(*s)) for s in out_specs])

        def infer(mesh, arg_shapes, result_shape):
            return tuple(run(mesh, arg_shapes)[1])

        def partition(mesh, arg_shapes, result_shape):
            in_shardings, out_shardings = run(mesh, arg_shapes)

            def local(*operands):
                return tuple(inner.bind(*_fit_local(operands, params), **params))
            return mesh, local, tuple(out_shardings), tuple(in_shardings)

        # Shardy wants special factors in the order the rule first names them.
        factor_order = list(dict.fromkeys(re.findall(r"\w+", rule_str)))
        op.def_partition(partition, infer_sharding_from_operands=infer, sharding_rule=rule_str,
                         need_replication_factors=tuple(sorted(whole, key=factor_order.index)),
                         **sizes)
        return mlir.lower_fun(op, multiple_results=True)(ctx, *args)

    # custom_partitioning must see the device assignment when it is lowered, and jit provides one
    # only to computations holding a primitive from this (private) set; custom_partitioning's own
    # primitive is in it, but here it appears only inside `outer`'s lowering. Same for the
    # lowering cache, which would lower `outer` once for any devices.
    try:
        from jax._src import dispatch
        dispatch.prim_requires_devices_during_lowering.add(outer)
    except (ImportError, AttributeError):  # a JAX without the set: lowering still works on one device
        pass
    mlir.register_lowering(outer, lowering, cacheable=False)


def _partitioned(ctx) -> bool:
    """Whether the computation is lowered for a partitioner: jit over several devices, or a mesh
    (custom_partitioning itself inlines the call inside shard_map's manual axes)."""
    axis_context = ctx.module_context.axis_context
    devices = getattr(axis_context, "device_assignment", None)
    return (devices is not None and len(devices) > 1) or hasattr(axis_context, "manual_axes")


def _fit_local(operands, params):
    """Per-device operands as the inner op expects them. Pure-decode paged attention ignores the
    values of cu_q_lens but checks its shape [S + 1]: a device holding S / n sequences gets the
    first S / n + 1 entries of the (whole) array."""
    if params.get("decode_only"):
        q, k, v, kv_lens, tables, cu = operands
        return (q, k, v, kv_lens, tables, cu[:kv_lens.shape[0] + 1])
    return operands


def paged_attention_rule(avals_in, params):
    """Factors: t tokens (= sequences b in pure decode), k KV heads, g heads per KV head."""
    q, k_cache = avals_in[0], avals_in[1]
    nhd = params["kv_layout"] == 0
    num_kv_heads = k_cache.shape[2] if nhd else k_cache.shape[1]
    group = q.shape[1] // num_kv_heads
    decode = params["decode_only"]
    b = "t" if decode else "b"
    cache = "p s k d" if nhd else "p k s d"
    rule = f"t (k g) d, {cache}, {cache}, {b}, {b} m, c -> t (k g) d, t (k g)"
    whole = ["g", "p", "s", "d", "m", "c"] + ([] if decode else ["t", "b"])
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
        ins = [(seqs, heads, None), cache_spec, cache_spec, (seqs,), (seqs, None), (None,)]
        return ins, [(seqs, heads, None), (seqs, heads)]
    return rule, {"g": group}, whole, plan


def mla_decode_rule(avals_in, params):
    """Factors: b sequences, h query heads; the caches and tables' page axis stay whole."""
    rule = "b q h l, b q h r, p s w, p s v, b, b m -> b q h l, b q h"
    batch, _, num_heads, _ = avals_in[0].shape

    def plan(spec_of, fits):
        seqs, heads = spec_of(0, 0), spec_of(0, 2)
        if seqs is not None and not fits(seqs, batch):
            seqs = None
        if heads is not None and (heads == seqs or not fits(heads, num_heads)):
            heads = None
        q_spec = (seqs, None, heads, None)
        ins = [q_spec, q_spec, (None, None, None), (None, None, None), (seqs,), (seqs, None)]
        return ins, [q_spec, (seqs, None, heads)]
    return rule, {}, ["q", "l", "r", "p", "s", "w", "v", "m"], plan
