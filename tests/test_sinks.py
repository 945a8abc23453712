"""Attention sinks for both ops against the reference: finite, -inf (no sink) and +inf sinks,
rows with no key, NaN rows, with the other options, under vmap; errors name the argument."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpaged
from jaxpaged import reference
from cases import DTYPES, assert_close, mla_case, paged_case


def _sinks(rng, num_heads):
    sinks = rng.standard_normal(num_heads).astype(np.float32) * 3
    sinks[0], sinks[1] = -np.inf, np.inf  # no sink at all; a sink that takes the whole row
    return jnp.asarray(sinks)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decode", [False, True])
def test_paged_sinks_match_reference(rng, dtype, decode):
    case = paged_case(rng, q_lens=[1] * 4 if decode else [1, 9, 0, 4], kv_lens=[50, 70, 0, 33], num_q_heads=8,
                      num_kv_heads=2, head_dim=128, page_size=16, dtype=dtype, decode=decode,
                      pad_rows=0 if decode else 3)
    args = case.args()[:5] if decode else case.args()
    sinks = _sinks(rng, 8)
    for kw in ({}, dict(soft_cap=20.0, sliding_window=24)):
        out, lse = jax.jit(functools.partial(jaxpaged.paged_attention, sinks=sinks, return_lse=True, **kw))(*args)
        ref_out, ref_lse = reference.paged_attention(*args, sinks=sinks, return_lse=True, **kw)
        assert_close(out, ref_out, dtype)
        assert_close(lse, ref_lse, dtype, "lse")
        plain_lse = reference.paged_attention(*args, return_lse=True, **kw)[1]
        assert_close(lse, plain_lse, dtype, "lse")  # lse excludes the sink


def test_paged_sinks_keep_nan_rows(rng):
    case = paged_case(rng, q_lens=[1, 4], kv_lens=[20, 40], num_q_heads=4, num_kv_heads=2, head_dim=64,
                      page_size=16, dtype=DTYPES[0])
    q, k, v, lens, table, cu = case.args()
    table = table.at[1, 1].set(10**6)  # sequence 1's second page is out of range: its rows are NaN
    out = jaxpaged.paged_attention(q, k, v, lens, table, cu, sinks=jnp.zeros(4))
    ref = reference.paged_attention(q, k, v, lens, table, cu, sinks=jnp.zeros(4))
    assert np.isnan(np.asarray(ref, np.float32)).any()
    assert_close(out, ref, DTYPES[0])


def test_sinks_under_vmap_per_instance(rng):
    case = paged_case(rng, q_lens=[1] * 3, kv_lens=[30, 17, 64], num_q_heads=4, num_kv_heads=1, head_dim=64,
                      page_size=16, dtype=DTYPES[0], decode=True)
    sinks = jnp.stack([_sinks(rng, 4), _sinks(rng, 4)])
    out = jax.vmap(lambda s: jaxpaged.paged_attention(*case.args()[:5], sinks=s))(sinks)
    for i in range(2):
        assert_close(out[i], reference.paged_attention(*case.args()[:5], sinks=sinks[i]), DTYPES[0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_mla_sinks_match_reference(rng, dtype):
    case = mla_case(rng, kv_lens=[0, 45, 130], s_q=2, num_heads=16, page_size=64, dtype=dtype, combined=True)
    sinks = _sinks(rng, 16)
    out, lse = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, causal=True, sinks=sinks))(*case.args())
    ref_out, ref_lse = reference.mla_decode(*case.args(), scale=0.07, causal=True, sinks=sinks)
    assert_close(out, ref_out, dtype)
    assert_close(lse, ref_lse, dtype, "lse")


def test_sinks_errors_name_the_argument(rng):
    case = paged_case(rng, q_lens=[1], kv_lens=[5], num_q_heads=4, num_kv_heads=1, head_dim=64, page_size=16,
                      dtype=DTYPES[0], decode=True)
    with pytest.raises(ValueError, match=r"^sinks must have shape \[Hq\] = \(4,\); got \(2,\)"):
        jaxpaged.paged_attention(*case.args()[:5], sinks=jnp.zeros(2))
    with pytest.raises(ValueError, match=r"^sinks must be a float array \[Hq\]; got int32"):
        jaxpaged.paged_attention(*case.args()[:5], sinks=jnp.zeros(4, jnp.int32))
    mla = mla_case(rng, kv_lens=[5], s_q=1, num_heads=16, page_size=16, dtype=DTYPES[0], combined=True)
    with pytest.raises(ValueError, match=r"^sinks must have shape \[Hq\] = \(16,\)"):
        jaxpaged.mla_decode(*mla.args(), scale=0.1, sinks=jnp.zeros(8))
