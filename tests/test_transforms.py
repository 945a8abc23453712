"""jit with traced lengths and tables, and vmap, for both ops."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpaged
from jaxpaged import reference
from cases import DTYPES, assert_close, mla_case, paged_case

DTYPE = DTYPES[0]


def test_jit_traced_lens_one_trace(rng):
    case = paged_case(rng, q_lens=[1, 4, 1], kv_lens=[30, 40, 50], num_q_heads=8, num_kv_heads=2,
                      head_dim=64, page_size=16, dtype=DTYPE)
    traces = []

    def op(*args):
        traces.append(1)
        return jaxpaged.paged_attention(*args)

    f = jax.jit(op)
    q, k, v, lens, table, cu = case.args()
    for new_lens, new_cu in [([30, 40, 50], [0, 1, 5, 6]), ([3, 17, 45], [0, 2, 3, 6]), ([0, 1, 2], [0, 0, 6, 6])]:
        lens_, cu_ = jnp.asarray(new_lens, jnp.int32), jnp.asarray(new_cu, jnp.int32)
        assert_close(f(q, k, v, lens_, table, cu_), reference.paged_attention(q, k, v, lens_, table, cu_), DTYPE)
    assert len(traces) == 1  # lengths and offsets are data, never shapes: one trace serves all


def test_eager_call_matches_jit(rng):
    case = paged_case(rng, q_lens=[1, 1], kv_lens=[30, 5], num_q_heads=4, num_kv_heads=4, head_dim=64,
                      page_size=16, dtype=DTYPE, decode=True)
    eager = jaxpaged.paged_attention(*case.args()[:5])
    assert_close(eager, jax.jit(jaxpaged.paged_attention)(*case.args()[:5]), DTYPE)


def _stack(cases, field):
    return jnp.stack([getattr(c, field) for c in cases])


def test_vmap_decode_queries_over_shared_cache(rng):
    case = paged_case(rng, q_lens=[1] * 3, kv_lens=[30, 40, 50], num_q_heads=8, num_kv_heads=2,
                      head_dim=128, page_size=16, dtype=DTYPE, decode=True)
    qs = jnp.asarray(rng.standard_normal((4,) + case.q.shape), DTYPE)
    f = lambda q: jaxpaged.paged_attention(q, case.k_cache, case.v_cache, case.kv_lens, case.block_tables,
                                           soft_cap=5.0)
    out = jax.jit(jax.vmap(f))(qs)
    for i in range(4):
        ref = reference.paged_attention(qs[i], case.k_cache, case.v_cache, case.kv_lens, case.block_tables,
                                        soft_cap=5.0)
        assert_close(out[i], ref, DTYPE)


@pytest.mark.parametrize("kv_layout", ["NHD", "HND"])
def test_vmap_ragged_everything_mapped(rng, kv_layout):
    # Same shapes, different contents per instance (each holds 2 pages per sequence); padding rows
    # must stay padding after the instances are folded into one call.
    cases = [paged_case(rng, q_lens=q_lens, kv_lens=kv_lens, num_q_heads=4, num_kv_heads=1, head_dim=64,
                        page_size=16, dtype=DTYPE, kv_layout=kv_layout, pad_rows=pad)
             for q_lens, kv_lens, pad in [([1, 5], [20, 30], 2), ([3, 3], [30, 17], 2), ([6, 0], [17, 18], 2)]]
    f = functools.partial(jaxpaged.paged_attention, kv_layout=kv_layout, return_lse=True)
    fields = ["q", "k_cache", "v_cache", "kv_lens", "block_tables", "cu_q_lens"]
    out, lse = jax.jit(jax.vmap(f))(*[_stack(cases, name) for name in fields])
    for i, c in enumerate(cases):
        ref_out, ref_lse = reference.paged_attention(*c.args(), kv_layout=kv_layout, return_lse=True)
        assert_close(out[i], ref_out, DTYPE)
        assert_close(lse[i], ref_lse, DTYPE, "lse")


def test_vmap_mla_with_and_without_mapped_cache(rng):
    cases = [mla_case(rng, kv_lens=lens, s_q=2, num_heads=16, page_size=16, dtype=DTYPE, combined=True)
             for lens in ([10, 60], [60, 10])]
    scale = 0.1
    mapped = jax.jit(jax.vmap(functools.partial(jaxpaged.mla_decode, scale=scale, causal=True),
                              in_axes=(0, 0, 0, None, 0, 0)))
    out, lse = mapped(_stack(cases, "q_nope"), _stack(cases, "q_pe"), _stack(cases, "ckv_cache"), None,
                      _stack(cases, "kv_lens"), _stack(cases, "block_tables"))
    for i, c in enumerate(cases):
        ref_out, ref_lse = reference.mla_decode(*c.args(), scale=scale, causal=True)
        assert_close(out[i], ref_out, DTYPE)
        assert_close(lse[i], ref_lse, DTYPE, "lse")
    # Queries mapped, cache shared.
    c = cases[0]
    shared = jax.vmap(lambda qn, qp: jaxpaged.mla_decode(qn, qp, c.ckv_cache, None, c.kv_lens, c.block_tables,
                                                         scale=scale))
    out, _ = shared(_stack(cases, "q_nope"), _stack(cases, "q_pe"))
    for i, other in enumerate(cases):
        ref_out, _ = reference.mla_decode(other.q_nope, other.q_pe, c.ckv_cache, None, c.kv_lens,
                                          c.block_tables, scale=scale)
        assert_close(out[i], ref_out, DTYPE)
