"""Attention sinks (gpt-oss): a learned per-head logit that joins a row's softmax denominator as a
key with a zero value. With S = sum_j exp(s_j) = exp(lse), the row's output becomes
out * S / (S + exp(sink)) = out * sigmoid(lse - sink), and lse (which excludes the sink) is
unchanged. So sinks are one small elementwise XLA op after the kernel, for every op and platform.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def check_sinks(sinks, num_heads: int):
    """sinks as float32 [Hq], or a ValueError naming it."""
    sinks = jnp.asarray(sinks)
    if not jnp.issubdtype(sinks.dtype, jnp.floating):
        raise ValueError(f"sinks must be a float array [Hq]; got {sinks.dtype}")
    if sinks.shape != (num_heads,):
        raise ValueError(f"sinks must have shape [Hq] = ({num_heads},); got {sinks.shape}")
    return sinks.astype(jnp.float32)


def apply_sinks(out, lse, sinks):
    """out [..., Hq, D] and lse [..., Hq] of a call without sinks -> out with them. A row that sees
    no key (lse -inf) keeps output 0; a NaN row stays NaN."""
    weight = jnp.where(lse == -jnp.inf, 0.0, jax.nn.sigmoid(lse - sinks))
    return (out.astype(jnp.float32) * weight[..., None]).astype(out.dtype)
