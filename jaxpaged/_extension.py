"""Loads the compiled module and registers its XLA FFI handlers, once, per platform; and exposes
the GPU workspace sizes the ops' lowerings ask of it."""

from __future__ import annotations

import os

import jax

try:
    from jaxpaged import _jaxpaged
except ImportError as e:  # most often: the source tree, which has no compiled module, shadows it
    here = os.path.dirname(os.path.abspath(__file__))
    raise ImportError(
        f"jaxpaged: the compiled module _jaxpaged was not found next to {here}. If that is the source "
        "tree (importing from the repository root puts it first on sys.path), run Python from "
        "another directory or with -P, or install the package first (pip install .)") from e

# XLA platform name of the GPU handlers ("CUDA" or "ROCM"), or None for a CPU-only build.
GPU_PLATFORM: str | None = _jaxpaged.gpu_platform()
# The lowering-platform spelling JAX uses for it ("cuda" / "rocm").
GPU_LOWERING_PLATFORM: str | None = GPU_PLATFORM.lower() if GPU_PLATFORM else None
# The FFI targets this build has GPU handlers for (a lowering for any other raises a ValueError).
GPU_TARGETS: frozenset[str] = frozenset(_jaxpaged.registrations().get(GPU_PLATFORM, {})) if GPU_PLATFORM else frozenset()

# Bytes of GPU workspace of one call (the layouts are defined in C++: src/*/workspace.h).
paged_attention_workspace_bytes = _jaxpaged.paged_attention_workspace_bytes
mla_decode_workspace_bytes = _jaxpaged.mla_decode_workspace_bytes
mla_decode_sparse_workspace_bytes = _jaxpaged.mla_decode_sparse_workspace_bytes
# int32 words of an MLA decode plan for a batch (any device: src/mla_decode/workspace.h).
mla_decode_plan_ints = _jaxpaged.mla_decode_plan_ints
# int32 words of a paged-attention plan (the tile list: src/paged_attention/workspace.h).
paged_attention_plan_ints = _jaxpaged.paged_attention_plan_ints


def _register_all() -> None:
    for platform, targets in _jaxpaged.registrations().items():
        for name, capsule in targets.items():
            jax.ffi.register_ffi_target(name, capsule, platform=platform, api_version=1)


_register_all()
