"""Sharding machinery: how an op runs when jit partitions its operands over a device mesh. Each
op's own rule (which dims may be split) is its spec's `sharding_rule`, in the op's module.

Each op has an outer primitive (shape rule, batching rule; what users bind) and an inner one
(the FFI lowerings; jaxpaged/_spec.py). The outer one lowers through `custom_partitioning` to the
inner one, so the partitioner can run the op on each device's shard instead of gathering whole
operands first. On one device the outer call lowers straight to the inner FFI call (the same HLO
as without these rules); inside `shard_map`, custom_partitioning itself inlines it.

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


def register_partitioned_lowering(outer: Primitive, inner: Primitive, rule, local_operands) -> None:
    """Lowers `outer` to `inner` through custom_partitioning, on every platform.

    rule(avals_in, params) -> (sharding_rule string, factor sizes, factors that stay whole, plan)
    where plan(spec_of, fits) -> (operand specs, result specs) picks the specs the op runs with:
    spec_of(i, dim) is the mesh axis (or None) of operand i's dim in the partitioner's proposal,
    fits(axis, n) whether that axis splits n evenly (an axis that does not is not used: the
    dimension is computed whole instead of in uneven or padded pieces).
    local_operands(operands, params) -> the operands the inner op gets on one device, from its shards.
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
                return tuple(inner.bind(*local_operands(operands, params), **params))
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
