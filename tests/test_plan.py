"""jaxpaged.mla_decode_plan: a schedule made once per serving step and passed to each layer's
mla_decode call gives exactly the results of the calls without it (on the GPU's Hopper path the
calls then read the plan instead of making their own schedule)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpaged
from jaxpaged import _fp8, reference
from cases import ON_GPU, PORTABLE, assert_close, mla_case

SCALE = 1.0 / np.sqrt(192.0)


def plan_for(case, **kw):
    _, s_q, heads, _ = case.q_nope.shape
    return jaxpaged.mla_decode_plan(case.kv_lens, case.block_tables, num_heads=heads,
                                    page_size=case.ckv_cache.shape[1], s_q=s_q, **kw)


def same(a, b):
    a, b = (np.asarray(jnp.asarray(x, jnp.float32)) for x in (a, b))
    return np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("kv_lens, s_q, heads, page_size, combined, causal", [
    ([1, 70, 129, 0, 200], 1, 16, 64, True, False),
    ([3000], 1, 128, 64, True, False),              # one long sequence: cut into many pieces
    ([64] * 12, 1, 128, 64, True, False),           # equal lengths: cut at sequence ends
    ([5, 90, 2, 33], 2, 32, 16, False, True),       # speculative rows, gathered tiles
    ([300, 1, 77], 4, 20, 1, True, True),           # page size 1, a block partly empty
])
def test_plan_gives_the_same_results(rng, kv_lens, s_q, heads, page_size, combined, causal):
    case = mla_case(rng, kv_lens=kv_lens, s_q=s_q, num_heads=heads, page_size=page_size, dtype="bfloat16",
                    combined=combined)
    call = jax.jit(functools.partial(jaxpaged.mla_decode, scale=SCALE, causal=causal))
    out, lse = call(*case.args())
    make = jax.jit(lambda lens, table: jaxpaged.mla_decode_plan(lens, table, num_heads=heads, page_size=page_size,
                                                                s_q=s_q))
    plan = make(case.kv_lens, case.block_tables)  # (a plan leaves a jit as it enters one: a pytree)
    out_p, lse_p = call(*case.args(), plan=plan)
    assert same(out, out_p) and same(lse, lse_p)
    ref_out, ref_lse = reference.mla_decode(*case.args(), scale=SCALE, causal=causal)
    assert_close(out_p, ref_out, "bfloat16")
    assert_close(lse_p, ref_lse, "bfloat16", "lse")


def test_plan_with_an_fp8_cache_and_traced_scale(rng):
    case = mla_case(rng, kv_lens=[200, 3, 129], s_q=1, num_heads=64, page_size=64, dtype="bfloat16",
                    combined=True)
    cache = _fp8.quantize(case.ckv_cache, 0.02, jnp.float8_e4m3fn)
    args = (case.q_nope, case.q_pe, cache, None, case.kv_lens, case.block_tables)
    call = jax.jit(lambda s, *a, plan=None: jaxpaged.mla_decode(*a, scale=s, kv_scale=0.02, plan=plan))
    out, lse = call(jnp.float32(SCALE), *args)
    out_p, lse_p = call(jnp.float32(SCALE), *args, plan=plan_for(case))
    assert same(out, out_p) and same(lse, lse_p)


def test_one_plan_for_every_layer_of_a_scan(rng):
    """A serving step: the plan made once, then a scan over layers, each with its own queries."""
    case = mla_case(rng, kv_lens=[40, 1000, 7, 300], s_q=1, num_heads=128, page_size=64, dtype="bfloat16",
                    combined=True)
    layers = 3
    qs = jnp.stack([case.q_nope * (i + 1) for i in range(layers)])
    rest = case.args()[1:]

    def step(qs, kv_lens, use_plan):
        plan = jaxpaged.mla_decode_plan(kv_lens, rest[4], num_heads=128, page_size=64) if use_plan else None

        def layer(carry, q):
            out, lse = jaxpaged.mla_decode(q, *rest[:3], kv_lens, rest[4], scale=SCALE, plan=plan)
            return carry, (out, lse)
        return jax.lax.scan(layer, 0, qs)[1]

    step = jax.jit(step, static_argnums=2)
    with_plan, without = step(qs, case.kv_lens, True), step(qs, case.kv_lens, False)
    for a, b in zip(with_plan, without):
        assert same(a, b)
    ref_out, _ = reference.mla_decode(qs[2], *rest, scale=SCALE)
    assert_close(with_plan[0][2], ref_out, "bfloat16")


def test_plan_under_vmap(rng):
    """vmap folds instances into one call, which then makes its own schedule: same results."""
    case = mla_case(rng, kv_lens=[90, 3], s_q=1, num_heads=16, page_size=16, dtype="bfloat16", combined=True)
    plan = plan_for(case)
    qs = jnp.stack([case.q_nope, -case.q_nope])
    f = lambda q, plan=None: jaxpaged.mla_decode(q, *case.args()[1:], scale=SCALE, plan=plan)  # noqa: E731
    out_p, lse_p = jax.vmap(lambda q: f(q, plan))(qs)
    out, lse = jax.vmap(f)(qs)
    assert same(out, out_p) and same(lse, lse_p)
    # A plan batched along with the queries (one per instance) too.
    plans = jax.vmap(lambda lens: jaxpaged.mla_decode_plan(lens, case.block_tables, num_heads=16, page_size=16))(
        jnp.stack([case.kv_lens, case.kv_lens]))
    out_b, _ = jax.vmap(f)(qs, plans)
    assert same(out, out_b)


def test_plan_contents():
    """The plan's size is the C++ layout's for any device; on the CPU it is zeros (unused), on a
    Hopper GPU its header holds the schedule's total cost (tiles + 2 per sequence)."""
    kv_lens = jnp.asarray([0, 64, 65, 5000], jnp.int32)  # 5000 > the 64 x 64 capacity: clamped
    table = jnp.zeros((4, 64), jnp.int32)
    plan = jaxpaged.mla_decode_plan(kv_lens, table, num_heads=128, page_size=64)
    words = np.asarray(plan.schedule)
    assert words.dtype == np.int32 and words.shape == (2 + 2 * 160 + 3 * 4,)
    assert (plan.batch, plan.rows, plan.capacity) == (4, 128, 4096)
    hopper = ON_GPU and not PORTABLE and getattr(jax.devices()[0], "compute_capability", "") == "9.0"
    if not ON_GPU:
        assert not words.any()
    elif hopper:
        assert words[1] == (0 + 1 + 2 + 64) + 2 * 4


def test_plan_errors(rng):
    case = mla_case(rng, kv_lens=[5, 9], s_q=1, num_heads=16, page_size=16, dtype="bfloat16", combined=True)
    call = functools.partial(jaxpaged.mla_decode, *case.args(), scale=SCALE)
    table = case.block_tables
    for bad in (jaxpaged.mla_decode_plan(case.kv_lens, table, num_heads=32, page_size=16),   # heads
                jaxpaged.mla_decode_plan(case.kv_lens, table, num_heads=16, page_size=16, s_q=2),  # rows
                jaxpaged.mla_decode_plan(case.kv_lens, table, num_heads=16, page_size=32),   # capacity
                jaxpaged.mla_decode_plan(case.kv_lens[:1], table[:1], num_heads=16, page_size=16)):  # batch
        with pytest.raises(ValueError, match="plan was made for"):
            call(plan=bad)
    with pytest.raises(ValueError, match="plan must come from"):
        call(plan=jnp.zeros(334, jnp.int32))
    with pytest.raises(ValueError, match="num_heads"):
        jaxpaged.mla_decode_plan(case.kv_lens, table, num_heads=0, page_size=16)
    with pytest.raises(ValueError, match="page_size"):
        jaxpaged.mla_decode_plan(case.kv_lens, table, num_heads=16, page_size=24)
    with pytest.raises(ValueError, match="block_tables"):
        jaxpaged.mla_decode_plan(case.kv_lens, table[0], num_heads=16, page_size=16)
