"""Loads the compiled module and registers its XLA FFI handlers, once, per platform."""

from __future__ import annotations

import jax

from jaxpaged import _jaxpaged

# XLA platform name of the GPU handlers ("CUDA" or "ROCM"), or None for a CPU-only build.
GPU_PLATFORM: str | None = _jaxpaged.gpu_platform()
# The lowering-platform spelling JAX uses for it ("cuda" / "rocm").
GPU_LOWERING_PLATFORM: str | None = GPU_PLATFORM.lower() if GPU_PLATFORM else None


def _register_all() -> None:
    for platform, targets in _jaxpaged.registrations().items():
        for name, capsule in targets.items():
            jax.ffi.register_ffi_target(name, capsule, platform=platform, api_version=1)


_register_all()
