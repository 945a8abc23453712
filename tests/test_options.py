"""Options as traced values: scale, soft_cap and sliding_window under a plain jax.jit, per layer in
a lax.scan, and per instance under vmap, against the reference and the static call."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpaged
from jaxpaged import reference
from cases import DTYPES, assert_close, mla_case, paged_case

DTYPE = DTYPES[0]


def _paged(rng, decode=False, kv_layout="NHD"):
    return paged_case(rng, q_lens=[1] * 3 if decode else [1, 7, 3], kv_lens=[37, 60, 21], num_q_heads=8,
                      num_kv_heads=2, head_dim=64, page_size=16, dtype=DTYPE, kv_layout=kv_layout,
                      decode=decode, pad_rows=0 if decode else 2)


def _static_kwargs(scale, soft_cap, window):
    """What a traced (scale, soft_cap, window) means, as static options: a cap that is not positive
    and finite is no cap, a window below 1 is no window."""
    kw = {"scale": scale}
    if soft_cap > 0 and np.isfinite(soft_cap):
        kw["soft_cap"] = soft_cap
    if window >= 1:
        kw["sliding_window"] = window
    return kw


OPTIONS = [(0.125, 30.0, 8), (0.2, 0.0, 0), (0.1, float("inf"), -3), (0.3, float("nan"), 2**31 - 1),
           (0.05, 5.0, 1), (0.15, -2.0, 16)]


@pytest.mark.parametrize("decode, kv_layout", [(False, "NHD"), (True, "NHD"), (False, "HND")])
def test_traced_options_match_static_call_and_reference(rng, decode, kv_layout):
    case = _paged(rng, decode, kv_layout)
    args = case.args()[:5] if decode else case.args()
    f = jax.jit(lambda sc, cap, w: jaxpaged.paged_attention(*args, scale=sc, soft_cap=cap, sliding_window=w,
                                                            kv_layout=kv_layout, return_lse=True))
    for sc, cap, w in OPTIONS:
        out, lse = f(jnp.float32(sc), jnp.float32(cap), jnp.int32(w))
        kw = _static_kwargs(sc, cap, w)
        static_out, static_lse = jaxpaged.paged_attention(*args, kv_layout=kv_layout, return_lse=True, **kw)
        ref_out, ref_lse = reference.paged_attention(*args, kv_layout=kv_layout, return_lse=True, **kw)
        traced_ref_out, _ = reference.paged_attention(
            *args, kv_layout=kv_layout, return_lse=True, scale=jnp.float32(sc), soft_cap=jnp.float32(cap),
            sliding_window=jnp.int32(w))
        assert_close(out, ref_out, DTYPE)
        assert_close(lse, ref_lse, DTYPE, "lse")
        assert_close(traced_ref_out, ref_out, DTYPE)  # the reference states the traced rule too
        np.testing.assert_array_equal(np.asarray(out, np.float32), np.asarray(static_out, np.float32))
        np.testing.assert_array_equal(np.asarray(lse), np.asarray(static_lse))


def test_scan_over_layers_with_per_layer_window_and_cap(rng):
    # Gemma-style: alternating global (window 0) and sliding layers, each with its own soft cap.
    case = _paged(rng)
    windows = jnp.array([0, 8, 0, 3], jnp.int32)
    caps = jnp.array([0.0, 20.0, 50.0, 0.0], jnp.float32)
    scales = jnp.array([0.125, 0.1, 0.2, 0.125], jnp.float32)
    qs = jnp.asarray(rng.standard_normal((4,) + case.q.shape), DTYPE)
    _, k, v, lens, tables, cu = case.args()

    def layer(carry, xs):
        q, w, cap, sc = xs
        out = jaxpaged.paged_attention(q, k, v, lens, tables, cu, scale=sc, soft_cap=cap, sliding_window=w)
        return carry, out
    _, outs = jax.jit(lambda: jax.lax.scan(layer, 0, (qs, windows, caps, scales)))()
    for i in range(4):
        kw = _static_kwargs(float(scales[i]), float(caps[i]), int(windows[i]))
        assert_close(outs[i], reference.paged_attention(qs[i], k, v, lens, tables, cu, **kw), DTYPE)


def test_vmap_over_options_and_queries(rng):
    case = _paged(rng)
    _, k, v, lens, tables, cu = case.args()
    windows = jnp.array([4, 0, 9], jnp.int32)
    qs = jnp.asarray(rng.standard_normal((3,) + case.q.shape), DTYPE)
    f = jax.jit(jax.vmap(lambda q, w: jaxpaged.paged_attention(q, k, v, lens, tables, cu, sliding_window=w,
                                                               soft_cap=30.0, return_lse=True)))
    out, lse = f(qs, windows)
    for i in range(3):
        kw = _static_kwargs(1 / 8, 30.0, int(windows[i]))
        ref_out, ref_lse = reference.paged_attention(qs[i], k, v, lens, tables, cu, return_lse=True, **kw)
        assert_close(out[i], ref_out, DTYPE)
        assert_close(lse[i], ref_lse, DTYPE, "lse")
    # Options mapped, nothing else: one call per instance on the same inputs.
    out = jax.vmap(lambda c: jaxpaged.paged_attention(*case.args(), soft_cap=c))(jnp.array([5.0, 0.0]))
    assert_close(out[0], reference.paged_attention(*case.args(), soft_cap=5.0), DTYPE)
    assert_close(out[1], reference.paged_attention(*case.args()), DTYPE)


def test_traced_window_int64_under_x64(rng):
    case = _paged(rng)
    with jax.enable_x64(True):
        f = jax.jit(lambda w: jaxpaged.paged_attention(*case.args(), sliding_window=w))
        for w in (5, 2**40, -(2**40)):
            kw = _static_kwargs(1 / 8, 0.0, min(w, 2**31 - 1))
            assert_close(f(jnp.int64(w)), reference.paged_attention(*case.args(), **kw), DTYPE)


def test_mla_traced_scale_in_jit_scan_and_vmap(rng):
    case = mla_case(rng, kv_lens=[45, 70], s_q=2, num_heads=16, page_size=16, dtype=DTYPE, combined=True)
    scales = jnp.array([0.05, 0.1, 0.2], jnp.float32)
    f = jax.jit(lambda s: jaxpaged.mla_decode(*case.args(), scale=s, causal=True))
    for s in scales:
        out, lse = f(s)
        ref_out, ref_lse = reference.mla_decode(*case.args(), scale=float(s), causal=True)
        assert_close(out, ref_out, DTYPE)
        assert_close(lse, ref_lse, DTYPE, "lse")
        static_out, _ = jaxpaged.mla_decode(*case.args(), scale=float(s), causal=True)
        np.testing.assert_array_equal(np.asarray(out, np.float32), np.asarray(static_out, np.float32))
    _, outs = jax.jit(lambda: jax.lax.scan(
        lambda c, s: (c, jaxpaged.mla_decode(*case.args(), scale=s)[0]), 0, scales))()
    vouts, _ = jax.jit(jax.vmap(functools.partial(jaxpaged.mla_decode, *case.args())))(scale=scales)
    for i, s in enumerate(scales):
        ref_out, _ = reference.mla_decode(*case.args(), scale=float(s))
        assert_close(outs[i], ref_out, DTYPE)
        assert_close(vouts[i], ref_out, DTYPE)
