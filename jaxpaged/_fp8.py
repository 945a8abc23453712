"""The quantized cache formats: per-tensor-scaled fp8, and DeepSeek-V3.2's 656-byte MLA rows.

Every op and the reference read and write them through these functions, so a format is defined
once: a value is stored as `x / scale` rounded to the nearest even fp8 value, saturated to the
format's finite maximum (a NaN stays NaN), and read back as `stored.astype(float32) * scale`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

FP8_DTYPES = (np.dtype(jnp.float8_e4m3fn), np.dtype(jnp.float8_e5m2))

# DeepSeek-V3.2's MLA cache row (uint8 [.., 656]): 512 e4m3 latent values, 4 float32 scales (one per
# 128 latent values, little-endian), 64 bfloat16 rope values.
DS_ROW_BYTES = 656
DS_GROUP = 128
_DS_LATENT, _DS_SCALES, _DS_ROPE = 512, 4 * 4, 64 * 2
E4M3_MAX = float(jnp.finfo(jnp.float8_e4m3fn).max)  # 448


def is_fp8(dtype) -> bool:
    return np.dtype(dtype) in FP8_DTYPES


def quantize(x, scale, dtype):
    """x (any float) stored in fp8 `dtype` with a scale (a scalar, or an array broadcasting to x):
    the float32 quotient x / scale rounded to the nearest fp8 value (ties to even), saturated to
    the finite maximum; NaN stays NaN.

    XLA compiles a division by a broadcast value as a multiplication by its reciprocal, at times
    one float32 step from the quotient, and a quotient on a tie between two fp8 values then rounds
    the wrong way. So the fp8 value that quotient gives is checked against its neighbours: for the
    midpoint m between it and each, whether the float32 quotient is above, on or below m, from the
    exact sign of x - (m +- half a float32 step of m) x scale (scale split into two 12-bit halves,
    whose products with m's <= 5 significant bits are exact). Elementwise, no memory traffic; exact
    for values and scales in float32's normal range. (One jitted function: called eagerly, its
    ~40 small ops took ~2 s to compile per new shape.)"""
    return _quantize(x, scale, jnp.dtype(dtype))


@functools.partial(jax.jit, static_argnums=2)
def _quantize(x, scale, fp8):
    top = float(jnp.finfo(fp8).max)
    x = jnp.asarray(x, jnp.float32)
    scale = jnp.asarray(scale, jnp.float32)
    q0 = x / scale
    first = jnp.clip(q0, -top, top).astype(fp8)
    # In magnitudes: the format is sign-magnitude and the rounding symmetric.
    ax, s = jnp.abs(x), jnp.abs(scale)
    bits = jax.lax.bitcast_convert_type(jnp.abs(first), jnp.uint8).astype(jnp.int32)
    top_bits = int(np.asarray(top, fp8).view(np.uint8))

    def value(b):
        return jax.lax.bitcast_convert_type(jnp.clip(b, 0, top_bits).astype(jnp.uint8), fp8).astype(jnp.float32)
    s_hi = jax.lax.bitcast_convert_type(jax.lax.bitcast_convert_type(s, jnp.uint32) & np.uint32(0xFFFFF000),
                                        jnp.float32)
    s_lo = s - s_hi

    def side(m):
        """+1, 0 or -1: the float32 quotient |x| / |scale| above, on or below the midpoint m."""
        d = (ax - m * s_hi) - m * s_lo  # |x| - m |scale|: exact where it is small
        half_up = (jnp.nextafter(m, jnp.float32(np.inf)) - m) / 2
        half_down = (m - jnp.nextafter(m, jnp.float32(0))) / 2  # (m is never 0)
        return jnp.where(d - half_up * s > 0, 1, jnp.where(d + half_down * s < 0, -1, 0))
    here = value(bits)
    up = side((here + value(bits + 1)) / 2)
    down = side((value(bits - 1) + here) / 2)
    fixed = jnp.where((bits < top_bits) & ((up > 0) | ((up == 0) & (bits % 2 == 1))), bits + 1,
                      jnp.where((bits > 0) & ((down < 0) | ((down == 0) & (bits % 2 == 1))), bits - 1, bits))
    mag = value(fixed)
    out = jnp.where(jnp.signbit(q0), -mag, mag).astype(fp8)  # (the quotient's sign is never wrong)
    # NaN, an infinite or zero scale, an infinite x: as the plain quotient says (NaN, or saturated).
    plain = jnp.isnan(q0) | ~jnp.isfinite(s) | (s == 0) | ~jnp.isfinite(x)
    return jnp.where(plain, first, out)


def dequantize(x, scale):
    return x.astype(jnp.float32) * scale


def _bytes(x, n):
    """The little-endian bytes of x's last axis, as uint8 [..., n]."""
    return jax.lax.bitcast_convert_type(x, jnp.uint8).reshape(x.shape[:-1] + (n,))


def _quotient_by_448(a):
    """float32 a / 448 rounded to nearest, for finite a >= 0 whose quotient is normal.

    XLA may compute the division as a multiplication by 1 / 448 (CPU) or with an approximate
    divide (GPU), each at times a float32 step off. So the quotient q it gives is corrected twice
    by the exact remainder r = a - q x 448: q's top 12 bits and the rest each times 448 (3
    significant bits) are exact products, a minus the first is exact (the two are within a factor
    of two), and r, a few of q's steps times 448, is representable. q moves a step up or down when
    r passes half a step times 448 (never a tie: 448's odd factor 7 puts no midpoint times 448 on
    a float32)."""
    # (On a in [0.5, 1): the steps of q stay normal, where the CPU's flush to zero would have made the
    # threshold of a small q's subnormal step 0; 2^e back on after is exact for a normal quotient.)
    a, e = jnp.frexp(jnp.asarray(a, jnp.float32))
    q = a / E4M3_MAX
    for _ in range(2):
        q_hi = jax.lax.bitcast_convert_type(jax.lax.bitcast_convert_type(q, jnp.uint32) & np.uint32(0xFFFFF000),
                                            jnp.float32)
        r = (a - q_hi * E4M3_MAX) - (q - q_hi) * E4M3_MAX
        up, down = jnp.nextafter(q, jnp.float32(np.inf)), jnp.nextafter(q, jnp.float32(0))
        q = jnp.where(r > (up - q) * (E4M3_MAX / 2), up, jnp.where(r < -(q - down) * (E4M3_MAX / 2), down, q))
    return jnp.ldexp(q, e)


def pack_ds_rows(latent, rope):
    """latent [..., 512] and rope [..., 64] (any float) as DeepSeek-V3.2 rows, uint8 [..., 656]:
    each group of 128 latent values gets scale max|x| / 448 (1.0 for an all-zero group)."""
    groups = jnp.asarray(latent, jnp.float32).reshape(latent.shape[:-1] + (4, DS_GROUP))
    amax = jnp.max(jnp.abs(groups), axis=-1, keepdims=True)
    scales = jnp.where(amax > 0, _quotient_by_448(amax), 1.0)
    values = quantize(groups, scales, jnp.float8_e4m3fn).reshape(latent.shape)
    return jnp.concatenate([_bytes(values, _DS_LATENT), _bytes(scales[..., 0], _DS_SCALES),
                            _bytes(jnp.asarray(rope, jnp.bfloat16), _DS_ROPE)], axis=-1)


def round_to_bf16(x):
    """float32 x rounded to the nearest bfloat16 value (ties to even; NaN stays NaN), as float32.
    In integer arithmetic: XLA may drop a float32 -> bfloat16 -> float32 convert pair (on GPUs,
    with its default xla_allow_excess_precision), which would skip the rounding."""
    bits = jax.lax.bitcast_convert_type(jnp.asarray(x, jnp.float32), jnp.uint32)
    rounded = (bits + jnp.uint32(0x7FFF) + ((bits >> 16) & jnp.uint32(1))) & jnp.uint32(0xFFFF0000)
    return jnp.where(jnp.isnan(x), x, jax.lax.bitcast_convert_type(rounded, jnp.float32))


def round_to_f16(x):
    """float32 x rounded to the nearest float16 value (ties to even; subnormals kept, magnitudes past
    65504 to infinity, NaN stays NaN), as float32. In float32 arithmetic that is exact (a multiple of
    the value's float16 quantum, by jnp.round's ties-to-even) rather than a convert pair that XLA
    may drop (see round_to_bf16)."""
    x = jnp.asarray(x, jnp.float32)
    _, e = jnp.frexp(x)  # |x| in [2^(e-1), 2^e)
    quantum = jnp.ldexp(jnp.ones_like(x), jnp.maximum(e - 1, -14) - 10)  # 2^-24 below 2^-14 (exact)
    r = jnp.round(x / quantum) * quantum
    r = jnp.where(jnp.abs(r) > 65504.0, jnp.copysign(jnp.inf, x), r)
    return jnp.where(jnp.isfinite(x), r, x)


def unpack_ds_rows(rows, dequant="float32"):
    """uint8 [..., 656] rows as (latent [..., 512], rope [..., 64]) float32: a latent value is its
    e4m3 value times its group's scale in float32, with dequant="bfloat16" then rounded to
    bfloat16 (to nearest even); with dequant="float16" the scale is rounded to float16 first and
    the product then (each to nearest even, subnormals kept, past 65504 infinite)."""
    lead = rows.shape[:-1]
    values = jax.lax.bitcast_convert_type(rows[..., :_DS_LATENT], jnp.float8_e4m3fn)
    scales = jax.lax.bitcast_convert_type(
        rows[..., _DS_LATENT:_DS_LATENT + _DS_SCALES].reshape(lead + (4, 4)), jnp.float32)
    if dequant == "float16":  # (the float32 product of an e4m3 value and a float16 scale is exact)
        scales = round_to_f16(scales)
    latent = (values.astype(jnp.float32).reshape(lead + (4, DS_GROUP)) * scales[..., None]).reshape(lead + (512,))
    if dequant == "float16":
        latent = round_to_f16(latent)
    if dequant == "bfloat16":
        latent = round_to_bf16(latent)
    rope = jax.lax.bitcast_convert_type(
        rows[..., _DS_LATENT + _DS_SCALES:].reshape(lead + (64, 2)), jnp.bfloat16).astype(jnp.float32)
    return latent, rope
