"""Shape/dtype checks shared by the ops' shape rules. Each raises ValueError naming the argument."""

from __future__ import annotations

import numpy as np
import jax.numpy as jnp

FLOAT_DTYPES = (np.dtype(jnp.bfloat16), np.dtype(np.float16), np.dtype(np.float32))
INT32 = np.dtype(np.int32)


def check_rank(name: str, aval, rank: int, expected: str) -> None:
    if aval.ndim != rank:
        raise ValueError(f"{name} must have shape {expected} (rank {rank}); got shape {aval.shape}")


def check_float(name: str, aval) -> None:
    if aval.dtype not in FLOAT_DTYPES:
        raise ValueError(f"{name} must be bfloat16, float16 or float32; got {aval.dtype}")


def check_same_dtype(name: str, aval, ref_name: str, ref) -> None:
    if aval.dtype != ref.dtype:
        raise ValueError(f"{name} must have the dtype of {ref_name} ({ref.dtype}); got {aval.dtype}")


def check_int32(name: str, aval, shape: tuple, expected: str) -> None:
    if aval.dtype != INT32:
        raise ValueError(f"{name} must be int32; got {aval.dtype}")
    if tuple(aval.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {expected} = {tuple(shape)}; got {aval.shape}")


def check_page_size(name: str, page_size: int) -> None:
    if page_size < 1 or page_size > 256 or page_size & (page_size - 1):
        raise ValueError(f"{name}: page_size must be a power of two from 1 to 256; got {page_size}")
