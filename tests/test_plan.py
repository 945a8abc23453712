"""jaxpaged.mla_decode_plan, mla_decode_sparse_plan and paged_attention_plan: a schedule made once per serving
step and passed to each layer's call gives exactly the results of the calls without it (on the GPU
the calls then read the plan - MLA's Hopper path, paged attention's tensor-core path - instead of
making their own schedule)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpaged
from jaxpaged import _fp8, reference
from cases import HOPPER, ON_GPU, PORTABLE, assert_close, mla_case, paged_case

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
    if not ON_GPU:
        assert not words.any()
    elif HOPPER:
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


# ---------------------------------------------------------------------------------------------
# jaxpaged.mla_decode_sparse_plan: the schedule of a step's sparse calls over lists of these lengths.

def _sparse_inputs(rng, batch, s_q, heads, topk, pages=40, page=64, ds=True):
    qn = jnp.asarray(rng.standard_normal((batch, s_q, heads, 512)), jnp.bfloat16)
    qp = jnp.asarray(rng.standard_normal((batch, s_q, heads, 64)), jnp.bfloat16)
    rows = jnp.asarray(rng.standard_normal((pages, page, 576)) * 0.5, jnp.bfloat16)
    cache = _fp8.pack_ds_rows(rows[..., :512], rows[..., 512:]) if ds else rows
    idx = jnp.asarray(rng.integers(-8, pages * page, (batch, s_q, topk)), jnp.int32)  # (negative: no key)
    return qn, qp, cache, idx


@pytest.mark.parametrize("batch, s_q, heads, topk, lens, opts", [
    (4, 1, 128, 2048, [2048, 1, 0, 700], dict(ds_dequant="float16")),   # a long list cut into pieces
    (6, 2, 16, 256, None, dict(fp8_math=True)),                         # s_q 2: lists of Hq rows
    (3, 1, 64, 128, [64, 128, 65], dict(ds_dequant="bfloat16")),
    (2, 2, 32, 64, [70, 3], {}),                                        # a bf16 cache; topk_lens past topk
])
def test_sparse_plan_gives_the_same_results(rng, batch, s_q, heads, topk, lens, opts):
    qn, qp, cache, idx = _sparse_inputs(rng, batch, s_q, heads, topk, ds=bool(opts))
    topk_lens = None if lens is None else jnp.asarray(lens, jnp.int32)
    call = jax.jit(functools.partial(jaxpaged.mla_decode_sparse, scale=SCALE, topk_lens=topk_lens, **opts))
    out, lse = call(qn, qp, cache, None, idx)
    make = jax.jit(lambda i, n: jaxpaged.mla_decode_sparse_plan(i, n, num_heads=heads))
    plan = make(idx, topk_lens)
    assert (plan.batch, plan.rows, plan.capacity) == (batch * s_q, heads, topk)
    out_p, lse_p = call(qn, qp, cache, None, idx, plan=plan)
    assert same(out, out_p) and same(lse, lse_p)
    if not opts.get("fp8_math"):
        ref_out, ref_lse = reference.mla_decode_sparse(qn, qp, cache, None, idx, scale=SCALE, topk_lens=topk_lens,
                                                       **opts)
        assert_close(out_p, ref_out, "bfloat16")
        assert_close(lse_p, ref_lse, "bfloat16", "lse")


def test_one_sparse_plan_for_every_layer_of_a_scan_and_under_vmap(rng):
    qn, qp, cache, idx = _sparse_inputs(rng, 4, 1, 64, 512)
    lens = jnp.asarray([512, 100, 1, 300], jnp.int32)
    qns = jnp.stack([qn, qn[::-1], qn * 0.5])

    def step(use_plan):
        plan = jaxpaged.mla_decode_sparse_plan(idx, lens, num_heads=64) if use_plan else None

        def layer(carry, q):
            out, _ = jaxpaged.mla_decode_sparse(q, qp, cache, None, idx, scale=SCALE, topk_lens=lens, plan=plan,
                                                ds_dequant="float16")
            return carry, out
        return jax.lax.scan(layer, 0, qns)[1]

    assert same(jax.jit(lambda: step(True))(), jax.jit(lambda: step(False))())
    plan = jaxpaged.mla_decode_sparse_plan(idx, lens, num_heads=64)
    f = lambda q: jaxpaged.mla_decode_sparse(q, qp, cache, None, idx, scale=SCALE, topk_lens=lens,  # noqa: E731
                                             plan=plan, ds_dequant="float16")[0]
    g = lambda q: jaxpaged.mla_decode_sparse(q, qp, cache, None, idx, scale=SCALE, topk_lens=lens,  # noqa: E731
                                             ds_dequant="float16")[0]
    assert same(jax.jit(jax.vmap(f))(qns), jax.jit(jax.vmap(g))(qns))  # (under vmap the plan is set aside)


def test_sparse_plan_errors(rng):
    qn, qp, cache, idx = _sparse_inputs(rng, 2, 1, 16, 64)
    call = functools.partial(jaxpaged.mla_decode_sparse, qn, qp, cache, None, idx, scale=SCALE)
    for bad in (jaxpaged.mla_decode_sparse_plan(idx, num_heads=32),                    # heads
                jaxpaged.mla_decode_sparse_plan(idx[:, :, :32], num_heads=16),         # topk
                jaxpaged.mla_decode_sparse_plan(idx[:1], num_heads=16)):               # lists
        with pytest.raises(ValueError, match="plan was made for"):
            call(plan=bad)
    with pytest.raises(ValueError, match="plan must come from jaxpaged.mla_decode_sparse_plan"):
        call(plan=jnp.zeros(334, jnp.int32))
    # (a dense plan of the same sizes - B x s_q, s_q x Hq and max_pages x page_size = topk - and the
    # reverse: the kinds do not mix)
    table = jnp.zeros((2, 1), jnp.int32)
    dense = jaxpaged.mla_decode_plan(jnp.zeros(2, jnp.int32), table, num_heads=16, page_size=64)
    with pytest.raises(ValueError, match="got a plan from jaxpaged.mla_decode_plan"):
        call(plan=dense)
    sparse = jaxpaged.mla_decode_sparse_plan(idx, num_heads=16)
    with pytest.raises(ValueError, match="got a plan from jaxpaged.mla_decode_sparse_plan"):
        jaxpaged.mla_decode(qn[..., :512], qp, cache, None, jnp.ones(2, jnp.int32), table, scale=SCALE, plan=sparse)
    with pytest.raises(ValueError, match="num_heads"):
        jaxpaged.mla_decode_sparse_plan(idx, num_heads=0)
    with pytest.raises(ValueError, match="indices must have shape"):
        jaxpaged.mla_decode_sparse_plan(idx[0], num_heads=16)
    with pytest.raises(ValueError, match="topk_lens"):
        jaxpaged.mla_decode_sparse_plan(idx, jnp.zeros(3, jnp.int32), num_heads=16)


# ---------------------------------------------------------------------------------------------
# jaxpaged.paged_attention_plan: the tile list of a step's paged_attention calls, made once.

def paged_plan_for(case, num_q_heads, num_kv_heads, page_size):
    return jaxpaged.paged_attention_plan(case.kv_lens, case.block_tables, case.cu_q_lens, num_q_heads=num_q_heads,
                                         num_kv_heads=num_kv_heads, page_size=page_size,
                                         num_tokens=None if case.cu_q_lens is None else case.q.shape[0])


@pytest.mark.parametrize("q_lens, kv_lens, hq, hkv, d, page, pad_rows, opts", [
    # prefill chunks beside decode tokens, an empty chunk, padding rows
    ([9, 1, 0, 40, 1], [9, 300, 17, 100, 2], 8, 2, 128, 16, 6, {}),
    # one long sequence beside a short one: the long one's keys split over blocks (KV splits on the
    # GPU), so the padding rows go through the splits' lse
    ([3, 1], [6000, 9], 8, 1, 64, 16, 5, {}),
    # GQA group 32 (large tiles even for one token), HND layout, soft cap and window
    ([1, 70, 1], [500, 90, 33], 32, 1, 128, 32, 3, dict(kv_layout="HND", soft_cap=30.0, sliding_window=64)),
    (None, [1, 700, 35, 0, 4096, 64], 16, 4, 256, 16, 0, {}),  # pure decode, D = 256
    (None, [777] * 300, 32, 8, 128, 16, 0, {}),  # pure decode past one wave: read from a list
])
def test_paged_plan_gives_the_same_results(rng, q_lens, kv_lens, hq, hkv, d, page, pad_rows, opts):
    decode = q_lens is None
    case = paged_case(rng, q_lens=[1] * len(kv_lens) if decode else q_lens, kv_lens=kv_lens, num_q_heads=hq,
                      num_kv_heads=hkv, head_dim=d, page_size=page, dtype="bfloat16",
                      kv_layout=opts.get("kv_layout", "NHD"), pad_rows=pad_rows, decode=decode)
    call = jax.jit(functools.partial(jaxpaged.paged_attention, return_lse=True, **opts))
    out, lse = call(*case.args())
    num_tokens = None if decode else case.q.shape[0]
    make = jax.jit(lambda lens, table, cu: jaxpaged.paged_attention_plan(
        lens, table, cu, num_q_heads=hq, num_kv_heads=hkv, page_size=page, num_tokens=num_tokens))
    plan = make(case.kv_lens, case.block_tables, case.cu_q_lens)  # (a pytree: it leaves a jit)
    out_p, lse_p = call(*case.args(), plan=plan)
    assert same(out, out_p) and same(lse, lse_p)
    ref_out, ref_lse = reference.paged_attention(*case.args(), return_lse=True, **opts)
    assert_close(out_p, ref_out, "bfloat16")
    assert_close(lse_p, ref_lse, "bfloat16", "lse")


def test_paged_plan_with_an_fp8_cache_traced_options_and_sinks(rng):
    case = paged_case(rng, q_lens=[4, 1, 17], kv_lens=[60, 200, 17], num_q_heads=8, num_kv_heads=2, head_dim=128,
                      page_size=16, dtype="bfloat16", pad_rows=2)
    k8, v8 = (_fp8.quantize(c, 0.05, jnp.float8_e4m3fn) for c in (case.k_cache, case.v_cache))
    sinks = jnp.asarray(rng.standard_normal(8), jnp.float32)
    call = jax.jit(lambda cap, *a, plan=None: jaxpaged.paged_attention(
        *a, soft_cap=cap, k_scale=0.05, v_scale=0.05, sinks=sinks, return_lse=True, plan=plan))
    args = (case.q, k8, v8, case.kv_lens, case.block_tables, case.cu_q_lens)
    out, lse = call(jnp.float32(25.0), *args)
    out_p, lse_p = call(jnp.float32(25.0), *args, plan=paged_plan_for(case, 8, 2, 16))
    assert same(out, out_p) and same(lse, lse_p)


def test_one_paged_plan_for_every_layer_of_a_scan(rng):
    """A serving step over a mixed batch: the plan made once, then a scan over layers."""
    case = paged_case(rng, q_lens=[30, 1, 1, 12], kv_lens=[30, 400, 77, 100], num_q_heads=16, num_kv_heads=4,
                      head_dim=128, page_size=16, dtype="bfloat16", pad_rows=4)
    layers = 3
    qs = jnp.stack([case.q * (i + 1) for i in range(layers)])
    rest = case.args()[1:]

    def step(qs, kv_lens, cu_q_lens, use_plan):
        plan = (jaxpaged.paged_attention_plan(kv_lens, rest[3], cu_q_lens, num_q_heads=16, num_kv_heads=4,
                                              page_size=16, num_tokens=qs.shape[1]) if use_plan else None)

        def layer(carry, q):
            return carry, jaxpaged.paged_attention(q, rest[0], rest[1], kv_lens, rest[3], cu_q_lens,
                                                   return_lse=True, plan=plan)
        return jax.lax.scan(layer, 0, qs)[1]

    step = jax.jit(step, static_argnums=3)
    with_plan, without = step(qs, case.kv_lens, case.cu_q_lens, True), step(qs, case.kv_lens, case.cu_q_lens, False)
    for a, b in zip(with_plan, without):
        assert same(a, b)
    ref_out = reference.paged_attention(qs[2], *rest)
    assert_close(with_plan[0][2], ref_out, "bfloat16")


def test_paged_plan_under_vmap(rng):
    """vmap folds instances into one call, which lists its own tiles: same results."""
    case = paged_case(rng, q_lens=[5, 1], kv_lens=[40, 90], num_q_heads=8, num_kv_heads=2, head_dim=64,
                      page_size=16, dtype="bfloat16", pad_rows=1)
    plan = paged_plan_for(case, 8, 2, 16)
    qs = jnp.stack([case.q, -case.q])
    f = lambda q, plan=None: jaxpaged.paged_attention(q, *case.args()[1:], return_lse=True, plan=plan)  # noqa: E731
    out_p, lse_p = jax.vmap(lambda q: f(q, plan))(qs)
    out, lse = jax.vmap(f)(qs)
    assert same(out, out_p) and same(lse, lse_p)
    plans = jax.vmap(lambda lens: jaxpaged.paged_attention_plan(
        lens, case.block_tables, case.cu_q_lens, num_q_heads=8, num_kv_heads=2, page_size=16,
        num_tokens=case.q.shape[0]))(jnp.stack([case.kv_lens, case.kv_lens]))
    out_b, _ = jax.vmap(f)(qs, plans)
    assert same(out, out_b)


def test_paged_plan_contents():
    """The plan's size is the C++ layout's; on the CPU it is zeros (unused); where the tensor-core
    kernel runs, its header counts the large tiles and all tiles."""
    kv_lens = jnp.asarray([10, 200, 5, 9000], jnp.int32)  # 9000 > the 16 x 16 capacity: clamped
    cu = jnp.asarray([0, 1, 41, 41, 43], jnp.int32)        # q_lens 1, 40, 0, 2 and 3 padding rows
    table = jnp.zeros((4, 16), jnp.int32)
    plan = jaxpaged.paged_attention_plan(kv_lens, table, cu, num_q_heads=32, num_kv_heads=8, page_size=16,
                                         num_tokens=46)
    words = np.asarray(plan.tiles)
    capacity = -(-46 * 4 // 64) + 4
    assert words.dtype == np.int32 and words.shape == (2 * (capacity + 1),)
    assert (plan.num_tokens, plan.num_seqs, plan.group, plan.capacity, plan.decode_only) == (46, 4, 4, 256, False)
    if not ON_GPU:
        assert not words.any()
    elif not PORTABLE:
        # rows: 4, 160 (large: 3 tiles of 64), 0 (none), 8: 3 large + 2 small tiles
        assert (words[0], words[1]) == (3, 5)
        assert sorted(words[2:12:2].tolist()) == [0, 1, 1, 1, 3]


def test_paged_plan_errors(rng):
    case = paged_case(rng, q_lens=[3, 1], kv_lens=[20, 9], num_q_heads=8, num_kv_heads=2, head_dim=64,
                      page_size=16, dtype="bfloat16")
    call = functools.partial(jaxpaged.paged_attention, *case.args())
    table, lens, cu, t = case.block_tables, case.kv_lens, case.cu_q_lens, case.q.shape[0]
    make = functools.partial(jaxpaged.paged_attention_plan, num_q_heads=8, num_kv_heads=2, page_size=16)
    for bad in (make(lens, table, cu, num_tokens=t + 1),                          # rows
                make(lens, table, cu, num_tokens=t, num_q_heads=16),                # group
                make(lens, table, cu, num_tokens=t, page_size=32),                  # capacity
                make(lens[:1], table[:1], cu[:2], num_tokens=t),                    # sequences
                make(jnp.asarray([20, 9, 4], jnp.int32), table[jnp.array([0, 1, 1])], None)):  # decode
        with pytest.raises(ValueError, match="plan was made for"):
            call(plan=bad)
    with pytest.raises(ValueError, match="plan must come from"):
        call(plan=jnp.zeros(8, jnp.int32))
    # A pure-decode plan for a ragged call of the same shapes (one token per sequence).
    dec = paged_case(rng, q_lens=[1, 1], kv_lens=[20, 9], num_q_heads=8, num_kv_heads=2, head_dim=64,
                     page_size=16, dtype="bfloat16", decode=True)
    decode_plan = make(dec.kv_lens, dec.block_tables, None)
    jaxpaged.paged_attention(*dec.args(), plan=decode_plan)  # (fits the decode call)
    with pytest.raises(ValueError, match="plan was made for"):
        jaxpaged.paged_attention(*dec.args()[:5], jnp.asarray([0, 1, 2], jnp.int32), plan=decode_plan)
    with pytest.raises(ValueError, match="num_tokens"):
        make(lens, table, cu)
    with pytest.raises(ValueError, match="num_tokens"):
        make(lens, table, None, num_tokens=5)
    with pytest.raises(ValueError, match="num_kv_heads"):
        make(lens, table, cu, num_tokens=t, num_kv_heads=3)
    with pytest.raises(ValueError, match="page_size"):
        make(lens, table, cu, num_tokens=t, page_size=24)
    with pytest.raises(ValueError, match="block_tables"):
        make(lens, table[0], cu, num_tokens=t)
    with pytest.raises(ValueError, match="cu_q_lens"):
        make(lens, table, cu[:2], num_tokens=t)
