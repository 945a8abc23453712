"""What the two ops' primitives share: construction, eager impl, per-platform lowering, and the
split-KV workspace the GPU kernels get as an extra FFI result."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import mlir

from jaxpaged import _extension


def make_primitive(name: str, abstract_eval) -> Primitive:
    """A two-result primitive (out, lse) whose eager call compiles and runs the op."""
    prim = Primitive(name)
    prim.multiple_results = True
    prim.def_abstract_eval(abstract_eval)

    @functools.lru_cache(maxsize=None)
    def compiled(**params):
        return jax.jit(functools.partial(prim.bind, **params))

    prim.def_impl(lambda *args, **params: compiled(**params)(*args))
    return prim


def kv_split_cap(parallel_blocks: int, max_kv: int) -> int:
    """Upper bound on how many blocks share one row's KV range (flash-decoding splits).

    Static: from shapes only. Splitting pays when the grid without it leaves the GPU partly idle:
    too few blocks, or a last wave that is mostly empty (an H100 holds about 400 of the paged
    kernel's blocks at once). The bound lets the grid grow to about 4096 blocks; each split keeps
    at least 128 keys. The GPU launcher picks the actual count, at most this, from the device's
    resident-block count (src/common/gpu_launch.h); the cap sizes the workspace.
    """
    want = math.ceil(4096 / max(parallel_blocks, 1))
    return int(max(1, min(want, 64, math.ceil(max(max_kv, 1) / 128))))


def register_lowerings(prim: Primitive, target: str, *, workspace_floats=None,
                       gpu_dtypes=(np.dtype(jnp.bfloat16), np.dtype(np.float16))) -> None:
    """CPU and (when built) GPU lowerings of `prim` to FFI target `target`.

    workspace_floats(avals_in, params) -> int gives the GPU kernels' float32 scratch size; it is
    appended as a third FFI result that the primitive does not expose. Scratch passed as a result is
    what keeps the call safe inside command buffers (no allocation in the handler).
    """

    def lower_cpu(ctx, *args, **params):
        return jax.ffi.ffi_lowering(target)(ctx, *args, **_ffi_attrs(params))

    mlir.register_lowering(prim, lower_cpu, platform="cpu")
    if _extension.GPU_LOWERING_PLATFORM is None:
        return

    def lower_gpu(ctx, *args, **params):
        dtype = ctx.avals_in[0].dtype
        if dtype not in gpu_dtypes:
            raise ValueError(
                f"jaxpaged: {prim.name} on GPU supports {', '.join(map(str, gpu_dtypes))}; got "
                f"{dtype} (float32 runs on CPU only)")
        ws = workspace_floats(ctx.avals_in, params)
        ws_aval = jax.core.ShapedArray((max(ws, 1),), jnp.float32)
        ctx = ctx.replace(avals_out=[*ctx.avals_out, ws_aval])
        results = jax.ffi.ffi_lowering(target)(ctx, *args, **_ffi_attrs(params))
        return results[:-1]

    mlir.register_lowering(prim, lower_gpu, platform=_extension.GPU_LOWERING_PLATFORM)


def batched_at_front(args, dims):
    """For a batching rule: (axis size, args with the mapped axis first, unmapped ones broadcast)."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    moved = [jnp.broadcast_to(a, (size,) + a.shape) if d is None else jnp.moveaxis(a, d, 0)
             for a, d in zip(args, dims)]
    return size, moved


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
