"""Generic machinery behind every op: an op is one `OpSpec` subclass (in the op's own module) and
`define(spec)` turns it into JAX primitives.

Each op gets two primitives:
- the outer one, `jaxpaged_<name>`, which users bind: shape rule (`spec.abstract_eval`), eager
  impl, batching rule (`spec.batch`), and a lowering through the sharding rule
  (`spec.sharding_rule`, see jaxpaged/_sharding.py);
- the inner one, `jaxpaged_<name>_ffi`, which lowers to the FFI target `jaxpaged_<name>` on CPU and
  GPU. On GPU the call gets one more result the primitive does not expose (unless
  `spec.gpu_workspace` is False, for a kernel that needs none): the kernels' workspace,
  whose size the extension computes (`spec.workspace_bytes`; the layout is C++'s alone). Scratch
  passed as a result is what keeps the call safe inside command buffers (no allocation in the
  handler).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

from jaxpaged import _extension, _sharding

GPU_DTYPES = (np.dtype(jnp.bfloat16), np.dtype(np.float16))


class OpSpec:
    """Everything op-specific about one op's primitives. Subclasses set `name` and define the
    methods; the sharding rule's contract is in jaxpaged/_sharding.py."""

    name: str                  # FFI target "jaxpaged_<name>"
    gpu_dtypes = GPU_DTYPES    # dtypes of the first operand the GPU kernels take
    gpu_workspace = True       # whether the GPU call gets a workspace result (workspace_bytes)
    primitive: Primitive       # the outer primitive, set by define()

    def abstract_eval(self, *avals, **params):
        """Shape/dtype rule: the results' ShapedArrays; ValueError naming the argument on bad input."""
        raise NotImplementedError

    def operand_output_aliases(self, avals_in, params) -> dict[int, int] | None:
        """Operands the call updates in place: {operand index: result index}, or None."""
        return None

    def gpu_unsupported(self, avals_in, params) -> str | None:
        """Why the GPU kernels cannot run a call with these operands (a ValueError at lowering),
        or None."""
        return None

    def workspace_bytes(self, avals_in, params, device: int) -> int:
        """Bytes of GPU workspace for a call with these operands on GPU `device` (-1: any)."""
        raise NotImplementedError

    def batch(self, args, dims, **params):
        """Batching rule: (results, result batch dims)."""
        raise NotImplementedError

    def sharding_rule(self, avals_in, params):
        """(Shardy rule string, factor sizes, factors that stay whole, plan): _sharding.py."""
        raise NotImplementedError

    def local_operands(self, operands, params):
        """A device's operands as the inner op expects them, from its shards (default: as is)."""
        return operands


def define(spec: OpSpec) -> Primitive:
    """Makes and registers the op's outer and inner primitives; returns the outer one."""
    outer = _make_primitive(f"jaxpaged_{spec.name}", spec.abstract_eval)
    inner = _make_primitive(f"jaxpaged_{spec.name}_ffi", spec.abstract_eval)
    spec.primitive = outer
    batching.primitive_batchers[outer] = spec.batch
    _sharding.register_partitioned_lowering(outer, inner, spec.sharding_rule, spec.local_operands)
    _register_ffi_lowerings(inner, f"jaxpaged_{spec.name}", spec)
    return outer


def _make_primitive(name: str, abstract_eval) -> Primitive:
    """A multiple-result primitive whose eager call compiles and runs the op."""
    prim = Primitive(name)
    prim.multiple_results = True
    prim.def_abstract_eval(abstract_eval)

    @functools.lru_cache(maxsize=None)
    def compiled(**params):
        return jax.jit(functools.partial(prim.bind, **params))

    prim.def_impl(lambda *args, **params: compiled(**params)(*args))
    return prim


def _register_ffi_lowerings(prim: Primitive, target: str, spec: OpSpec) -> None:
    def lower_cpu(ctx, *args, **params):
        aliases = spec.operand_output_aliases(ctx.avals_in, params)
        return jax.ffi.ffi_lowering(target, operand_output_aliases=aliases)(ctx, *args, **_ffi_attrs(params))

    mlir.register_lowering(prim, lower_cpu, platform="cpu")
    if _extension.GPU_LOWERING_PLATFORM is None:
        return

    def lower_gpu(ctx, *args, **params):
        dtype = ctx.avals_in[0].dtype
        if dtype not in spec.gpu_dtypes:
            raise ValueError(
                f"jaxpaged: {prim.name} on GPU supports {', '.join(map(str, spec.gpu_dtypes))}; got "
                f"{dtype} (float32 runs on CPU only)")
        why = spec.gpu_unsupported(ctx.avals_in, params)
        if why is not None:
            raise ValueError(f"jaxpaged: {prim.name} on GPU: {why}")
        if target not in _extension.GPU_TARGETS:
            raise ValueError(f"jaxpaged: {prim.name} has no {_extension.GPU_PLATFORM} kernel in this build "
                             "(it runs on CPU)")
        lower = jax.ffi.ffi_lowering(target, operand_output_aliases=spec.operand_output_aliases(ctx.avals_in, params))
        if not spec.gpu_workspace:
            return lower(ctx, *args, **_ffi_attrs(params))
        nbytes = max(spec.workspace_bytes(ctx.avals_in, params, d) for d in _gpu_ordinals(ctx))
        ws_aval = jax.core.ShapedArray((max(-(-nbytes // 4), 1),), jnp.float32)
        ctx = ctx.replace(avals_out=[*ctx.avals_out, ws_aval])
        return lower(ctx, *args, **_ffi_attrs(params))[:-1]

    mlir.register_lowering(prim, lower_gpu, platform=_extension.GPU_LOWERING_PLATFORM)


def _gpu_ordinals(ctx) -> list[int]:
    """The GPUs (local ordinals) the computation being lowered will run on, as far as the lowering
    knows them; [-1] (every visible GPU) when it does not."""
    axis_context = ctx.module_context.axis_context
    devices = getattr(axis_context, "device_assignment", None)
    if devices is None and getattr(axis_context, "mesh", None) is not None:
        try:
            devices = tuple(axis_context.mesh.devices.flat)
        except (AttributeError, ValueError):  # an abstract mesh: no devices yet
            devices = None
    here = jax.process_index()
    ordinals = {d.local_hardware_id for d in devices or ()
                if d.process_index == here and d.platform != "cpu" and d.local_hardware_id is not None}
    return sorted(ordinals) or [-1]


def to_front(x, dim, size: int):
    """For a batching rule: x with its mapped axis `dim` first, or broadcast to `size` if unmapped."""
    return jnp.broadcast_to(x, (size,) + x.shape) if dim is None else jnp.moveaxis(x, dim, 0)


def batched_at_front(args, dims):
    """For a batching rule: (axis size, args with the mapped axis first, unmapped ones broadcast)."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    return size, [to_front(a, d, size) for a, d in zip(args, dims)]


def own_ids(ids, per_instance: int):
    """Ids [n, ...] (page ids, token slots) of each instance moved into its own part of a pool of
    n * per_instance: id + i * per_instance, and -1 for an id outside the instance's own
    [0, per_instance), which then stays out of range of the pool too (never a neighbour's)."""
    n = ids.shape[0]
    offset = (jnp.arange(n, dtype=jnp.int32) * per_instance).reshape((n,) + (1,) * (ids.ndim - 1))
    return jnp.where((ids >= 0) & (ids < per_instance), ids + offset, -1)


def map_instances(primitive: Primitive, args, dims, **params):
    """For a batching rule that cannot fold its instances into one call (say, options that differ
    per instance): one call per instance under lax.map, over the mapped operands only (unmapped
    ones, like a shared cache, are not copied)."""
    mapped = [i for i, d in enumerate(dims) if d is not None]

    def one(xs):
        operands = list(args)
        for i, x in zip(mapped, xs):
            operands[i] = x
        return tuple(primitive.bind(*operands, **params))
    results = jax.lax.map(one, [jnp.moveaxis(args[i], dims[i], 0) for i in mapped])
    return results, (0,) * len(results)


def stack_caches(caches, block_tables, mapped: bool):
    """For a batching rule whose instances are folded into one call: the caches (each with the
    mapped axis first) as one page pool, and each instance's page ids moved to its own part of it.
    An id outside its own instance's [0, num_pages) becomes -1, out of range of the pool too, so it
    still poisons its rows instead of reading a neighbour's page. Unmapped caches (broadcast by
    batched_at_front) are shared by all instances as they are."""
    if not mapped:
        return [c[0] for c in caches], block_tables
    n, num_pages = caches[0].shape[:2]
    return [c.reshape((n * num_pages,) + c.shape[2:]) for c in caches], own_ids(block_tables, num_pages)


def _ffi_attrs(params: dict) -> dict:
    """Python params to typed FFI attributes (float32 / int32, as the C++ bindings declare)."""
    out = {}
    for key, value in params.items():
        if isinstance(value, float):
            out[key] = np.float32(value)
        elif isinstance(value, (bool, int)):
            out[key] = np.int32(value)
        else:
            raise TypeError(f"unsupported attribute {key}={value!r}")
    return out
