"""Shape/dtype checks shared by the ops' shape rules. Each raises ValueError naming the argument."""

from __future__ import annotations

import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np

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


# Key positions, page ids and row indices are 32-bit in the kernels.
INT32_MAX = 2**31 - 1
_TRACER = getattr(jax.core, "Tracer", ())


def is_traced(value) -> bool:
    """Whether value is a tracer (an abstract value inside jit, vmap, scan...)."""
    return isinstance(value, _TRACER)


def positive_int(name: str, value) -> int:
    """A positive Python (or numpy) int for a shape argument (a plan's num_heads, page_size...)."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive Python int; got {value!r}")
    return int(value)


def static_bool(name: str, value) -> bool:
    """A Python (or numpy) bool for an option the kernels take as an attribute."""
    if not isinstance(value, (bool, np.bool_)):
        got = "a traced value: mark it static" if is_traced(value) else repr(value)
        raise ValueError(f"{name} must be a Python bool; got {got}")
    return bool(value)


def static_number(name: str, value, *, positive: bool = False) -> float:
    """A finite Python number for an option the kernels take as an attribute."""
    if is_traced(value):
        raise ValueError(f"{name} must be a Python number, not a traced value: mark it static, e.g. "
                         f"jax.jit(f, static_argnames=({name!r},)), or close over it")
    is_number = isinstance(value, numbers.Real) or (np.ndim(value) == 0 and hasattr(value, "dtype")
                                                     and np.issubdtype(value.dtype, np.number))
    try:
        x = float(value) if is_number else math.nan
    except OverflowError:  # a Python int beyond float's range
        x = math.inf
    if not math.isfinite(x) or (positive and not x > 0):
        raise ValueError(f"{name} must be a {'positive ' if positive else ''}finite number; got {value!r}")
    return x


def option(name: str, value, *, positive: bool = False, integer: bool = False):
    """An op option (scale, soft_cap, sliding_window...), static or traced.

    A static value is checked here and returned as a Python number (positive integers for
    `integer` options, capped at INT32_MAX). A traced value (inside jit, scan...) cannot be checked
    before it runs: it must be a scalar of a real (integer for `integer`) dtype and is returned as
    a float32 / int32 scalar; the ops give its out-of-domain values a meaning instead (see
    `option_words`' callers)."""
    if not is_traced(value):
        x = static_number(name, value, positive=positive)
        if integer:
            if int(x) != x or x < 1:
                raise ValueError(f"{name} must be a positive integer or None; got {value!r}")
            return int(min(x, INT32_MAX))
        return x
    if jnp.ndim(value) != 0:
        raise ValueError(f"{name} must be a scalar; got a traced value of shape {jnp.shape(value)}")
    dtype = np.dtype(value.dtype)
    if integer:
        if not np.issubdtype(dtype, np.integer):
            raise ValueError(f"{name} must be an integer; got a traced value of dtype {dtype}")
        return jnp.clip(value, -INT32_MAX - 1, INT32_MAX).astype(jnp.int32)
    if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer)):
        raise ValueError(f"{name} must be a real number; got a traced value of dtype {dtype}")
    return jnp.asarray(value, jnp.float32)


def any_traced(*values) -> bool:
    return any(is_traced(v) for v in values)


def option_words(*values):
    """Options as the kernels read them from a device array: int32 words, floats by their bits."""
    words = [jax.lax.bitcast_convert_type(jnp.asarray(v, jnp.float32), jnp.int32)
             if isinstance(v, float) or jnp.issubdtype(jnp.result_type(v), jnp.floating)
             else jnp.asarray(v, jnp.int32) for v in values]
    return jnp.stack(words)


EMPTY_OPERAND = (0,)  # an optional operand left out: options all static, no topk_lens, no cu_q_lens


def check_options(aval, words: int) -> None:
    if aval.dtype != INT32 or aval.shape not in (EMPTY_OPERAND, (words,)):
        raise ValueError(f"options must be int32 [0] or [{words}]; got {aval.dtype} {aval.shape}")


def index_array(name: str, x, *, out_of_range: int | None = None):
    """x as int32: int32 arrays as they are; other integer dtypes (int64 under jax_enable_x64)
    cast after mapping values outside int32 to ones with the same meaning (out_of_range where
    given - an invalid page id - else the nearest int32, for lengths and offsets the ops clamp);
    Python lists and numpy arrays are converted. Anything else is a ValueError naming x."""
    if not hasattr(x, "dtype"):  # a Python list, tuple or scalar
        x = np.asarray(x)
    dtype = np.dtype(x.dtype)
    if dtype == INT32:
        return jnp.asarray(x)
    if not np.issubdtype(dtype, np.integer):
        raise ValueError(f"{name} must be int32; got {dtype}")
    x = jnp.asarray(x)
    if jnp.iinfo(x.dtype).max <= INT32_MAX and jnp.iinfo(x.dtype).min >= -INT32_MAX - 1:
        return x.astype(jnp.int32)
    if out_of_range is None:
        return jnp.clip(x, -INT32_MAX - 1, INT32_MAX).astype(jnp.int32)
    return jnp.where((x < -INT32_MAX - 1) | (x > INT32_MAX), out_of_range, x).astype(jnp.int32)


def check_key_positions(name: str, max_pages: int, page_size: int) -> None:
    """Key positions (up to max_pages * page_size) must fit the kernels' 32-bit arithmetic."""
    if max_pages * page_size > INT32_MAX:
        raise ValueError(f"{name}: max_pages * page_size ({max_pages} * {page_size}) must be below 2^31 "
                         "(key positions are 32-bit in the kernels)")
