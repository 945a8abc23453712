"""Randomized adversarial inputs (fixed seeds, 100 cases per op), every output and lse equal to the
reference, NaN pattern included: random ragged mixes, decreasing or out-of-range cu_q_lens,
lengths negative or past the table, junk and out-of-range page ids (also among the pages read),
NaN in every cache row no sequence owns, and vmap over stacked caches; also sinks (with -inf and
+inf), options as traced values, fp8 paged caches, the quantized MLA caches (CPU) and sparse MLA (CPU), drawn from a
second stream per seed so the original cases stay as they were."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpaged
from jaxpaged import _fp8, _inputs, reference
from cases import DTYPES, ON_GPU, assert_close

DTYPE = DTYPES[0]
CASES = 100
JUNK = np.array([-1, -7, 2**31 - 1, 1 << 20], np.int32)


def corrupt(rng, table, num_pages, lens, page_size):
    """Out-of-range ids: sometimes in a page a sequence reads, often in the unused entries."""
    table = table.copy()
    for s, L in enumerate(lens):
        used = -(-max(int(L), 0) // page_size)
        if used and rng.random() < 0.3:
            table[s, rng.integers(used)] = rng.choice([-1, num_pages, num_pages + 5, -(2**31)])
    return table


def messy_cu(rng, q_lens, T):
    """cu_q_lens: a valid cumulative sum, or one with decreasing and out-of-range entries."""
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int64)
    kind = rng.integers(4)
    if kind == 1:  # some entries decrease
        i = rng.integers(1, len(cu))
        cu[i] = max(cu[i] - rng.integers(1, 6), -3)
    elif kind == 2:  # out of range on both sides
        cu[rng.integers(len(cu))] = -rng.integers(1, 10)
        cu[rng.integers(len(cu))] = T + rng.integers(1, 10)
    elif kind == 3:  # a shuffled (mostly decreasing) mess
        cu = rng.integers(-4, T + 4, size=len(cu))
    return jnp.asarray(cu, jnp.int32)


def paged_case(seed):
    rng = np.random.default_rng(seed)
    num_q_heads, num_kv_heads = [(8, 2), (4, 4), (16, 2), (8, 1)][rng.integers(4)]
    page_size = int(rng.choice([1, 4, 16]))
    layout = "HND" if rng.random() < 0.3 else "NHD"
    S, max_pages = 4, max(2, 48 // page_size)
    capacity = max_pages * page_size
    decode = rng.random() < 0.3
    q_lens = [1] * S if decode else [int(x) for x in rng.integers(0, 10, size=S)]
    T = S if decode else 40  # ragged: padding rows after the chunks
    kv_lens = rng.integers(-5, capacity + 10, size=S)
    kv_lens = np.where(rng.random(S) < 0.6, np.maximum(kv_lens, q_lens), kv_lens)
    pool_lens = np.clip(kv_lens, 0, capacity)
    table, num_pages, used = _inputs.page_pool(rng, pool_lens, page_size, spare_pages=2, junk_ids=JUNK)
    table = np.concatenate([table, rng.choice(JUNK, size=(S, max_pages - table.shape[1] + 1))], 1)[:, :max_pages]
    shape = (num_pages, page_size, num_kv_heads, 64)
    k, v = (_inputs.poison(rng.standard_normal(shape, np.float32), used, pool_lens, table, page_size, 1)
            for _ in range(2))
    table = corrupt(rng, table, num_pages, pool_lens, page_size)
    if layout == "HND":
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    q = rng.standard_normal((T, num_q_heads, 64), np.float32)
    to = lambda x: jnp.asarray(x, DTYPE)  # noqa: E731
    cu = None if decode else messy_cu(rng, q_lens, T)
    options = dict(kv_layout=layout)
    if rng.random() < 0.3:
        options["soft_cap"] = 20.0
    if rng.random() < 0.3:
        options["sliding_window"] = int(rng.choice([1, 5, 24]))
    args = (to(q), to(k), to(v), jnp.asarray(kv_lens, jnp.int32), jnp.asarray(table), cu)
    return args, options


def extras(seed, num_heads):
    """Sinks (or None) and whether options go in traced, from a stream of their own."""
    rng = np.random.default_rng(20_000 + seed)
    sinks = None
    if rng.random() < 0.3:
        sinks = rng.standard_normal(num_heads).astype(np.float32) * 3
        sinks[rng.integers(num_heads)] = rng.choice([-np.inf, np.inf])
        sinks = jnp.asarray(sinks)
    return sinks, bool(rng.random() < 0.3), rng


def split_traced(options, traced):
    """(static options, traced options): the numeric ones go in as jit arguments when traced."""
    if not traced:
        return options, {}
    numeric = {k: jnp.asarray(v) for k, v in options.items()
               if k in ("soft_cap", "sliding_window", "scale", "k_scale", "v_scale")}
    return {k: v for k, v in options.items() if k not in numeric}, numeric


@pytest.mark.parametrize("seed", range(CASES))
def test_paged_attention_adversarial(seed):
    args, options = paged_case(seed)
    if args[-1] is None:
        args = args[:-1]
    sinks, traced, xrng = extras(seed, args[0].shape[1])
    if xrng.random() < 0.3:  # fp8 caches (NaN poison stays NaN), scales static or traced
        fmt = jnp.float8_e4m3fn if xrng.random() < 0.5 else jnp.float8_e5m2
        k8, v8 = (_fp8.quantize(c.astype(jnp.float32), sc, fmt) for c, sc in ((args[1], 0.03), (args[2], 0.05)))
        args = (args[0], k8, v8, *args[3:])
        options = dict(options, k_scale=0.03, v_scale=0.05)
    ref_out, ref_lse = reference.paged_attention(*args, return_lse=True, sinks=sinks, **options)
    static, dynamic = split_traced(options, traced)
    op = jax.jit(lambda *a, **kw: jaxpaged.paged_attention(*a, return_lse=True, sinks=sinks, **static, **kw))
    out, lse = op(*args, **dynamic)
    assert_close(out, ref_out, DTYPE, "out")
    assert_close(lse, ref_lse, DTYPE, "lse")


def mla_case(seed):
    rng = np.random.default_rng(10_000 + seed)
    num_heads = int(rng.choice([16, 64]))
    page_size = int(rng.choice([1, 16, 64]))
    B, s_q = 3, int(rng.integers(1, 3))
    max_pages = max(2, 160 // page_size)
    capacity = max_pages * page_size
    kv_lens = rng.integers(-5, capacity + 20, size=B)
    pool_lens = np.clip(kv_lens, 0, capacity)
    table, num_pages, used = _inputs.page_pool(rng, pool_lens, page_size, spare_pages=2, junk_ids=JUNK)
    table = np.concatenate([table, rng.choice(JUNK, size=(B, max_pages - table.shape[1] + 1))], 1)[:, :max_pages]
    cache = _inputs.poison(rng.standard_normal((num_pages, page_size, 576), np.float32), used, pool_lens,
                           table, page_size, 1)
    table = corrupt(rng, table, num_pages, pool_lens, page_size)
    to = lambda x: jnp.asarray(x, DTYPE)  # noqa: E731
    combined = rng.random() < 0.5
    ckv, kpe = (to(cache), None) if combined else (to(cache[..., :512]), to(cache[..., 512:]))
    q_nope = to(rng.standard_normal((B, s_q, num_heads, 512), np.float32))
    q_pe = to(rng.standard_normal((B, s_q, num_heads, 64), np.float32))
    causal = bool(rng.random() < 0.5)
    return (q_nope, q_pe, ckv, kpe, jnp.asarray(kv_lens, jnp.int32), jnp.asarray(table)), causal


def quantized_mla(rng, ckv, kpe):
    """Sometimes the same cache in a quantized format: (ckv, kpe, kwargs)."""
    kind = rng.integers(4)
    if kind == 1:  # fp8 combined (or fp8 latent + 16-bit rope)
        return _fp8.quantize(ckv, 0.02, jnp.float8_e4m3fn), kpe, dict(kv_scale=0.02)
    if kind >= 2 and kpe is None:  # DeepSeek-V3.2's 656-byte rows, read exactly or with bf16 / f16 dequantization
        read = dict(ds_dequant=["bfloat16", "float16"][rng.integers(2)]) if kind == 3 else {}
        return _fp8.pack_ds_rows(ckv[..., :512], ckv[..., 512:]), None, read
    return ckv, kpe, {}


@pytest.mark.parametrize("seed", range(CASES))
def test_mla_decode_adversarial(seed):
    args, causal = mla_case(seed)
    sinks, traced, rng = extras(seed, args[0].shape[2])
    ckv, kpe, fmt = quantized_mla(rng, args[2], args[3])
    args = (*args[:2], ckv, kpe, *args[4:])
    call = functools.partial(jaxpaged.mla_decode, causal=causal, sinks=sinks, **fmt)
    if traced:
        out, lse = jax.jit(lambda *a, s: call(*a, scale=s))(*args, s=jnp.float32(0.07))
    else:
        out, lse = jax.jit(functools.partial(call, scale=0.07))(*args)
    ref_out, ref_lse = reference.mla_decode(*args, scale=0.07, causal=causal, sinks=sinks, **fmt)
    assert_close(out, ref_out, DTYPE, "out")
    assert_close(lse, ref_lse, DTYPE, "lse")


@pytest.mark.parametrize("seed", range(4))
def test_vmap_keeps_each_instances_bad_ids_its_own(seed):
    """Two instances over stacked caches: an id valid in the pool but out of instance 0's range
    (it would be instance 1's page 0 after the fold) still gives instance 0 NaN."""
    (q, k, v, lens, table, cu), options = paged_case(seed)
    num_pages = k.shape[0]
    lens = jnp.clip(lens, 1, None)
    stack = lambda x: jnp.stack([x, x])  # noqa: E731
    args = [stack(a) for a in (q, k, v, lens, table)]
    # Instance 0's first pages: out of its range, but instance 1's page 0 once the pools are stacked.
    args[4] = args[4].at[0, :, 0].set(num_pages)
    extra = () if cu is None else (stack(cu),)
    f = functools.partial(jaxpaged.paged_attention, return_lse=True, **options)
    out, lse = jax.vmap(f)(*args, *extra)
    for i in range(2):
        ref_out, ref_lse = reference.paged_attention(*(a[i] for a in args), *(e[i] for e in extra),
                                                     return_lse=True, **options)
        assert_close(out[i], ref_out, DTYPE, "out")
        assert_close(lse[i], ref_lse, DTYPE, "lse")


@pytest.mark.parametrize("seed", range(4))
def test_mla_vmap_keeps_each_instances_bad_ids_its_own(seed):
    (q_nope, q_pe, ckv, kpe, lens, table), causal = mla_case(seed)
    num_pages = ckv.shape[0]
    lens = jnp.clip(lens, 1, None)
    stack = lambda x: None if x is None else jnp.stack([x, x])  # noqa: E731
    args = [stack(a) for a in (q_nope, q_pe, ckv, kpe, lens, table)]
    args[5] = args[5].at[0, :, 0].set(num_pages)  # as above: instance 1's page 0 after stacking
    in_axes = [0 if a is not None else None for a in args]
    f = functools.partial(jaxpaged.mla_decode, scale=0.07, causal=causal)
    out, lse = jax.vmap(f, in_axes=in_axes)(*args)
    for i in range(2):
        ref_out, ref_lse = reference.mla_decode(*(None if a is None else a[i] for a in args), scale=0.07,
                                                causal=causal)
        assert_close(out[i], ref_out, DTYPE, "out")
        assert_close(lse[i], ref_lse, DTYPE, "lse")
    assert bool(jnp.isnan(lse[0]).all())


def sparse_case(seed):
    """Sparse MLA: indices into a poisoned pool mixing valid slots, duplicates, -1 padding,
    slots past the pool and int32 extremes; random topk_lens (negative, past topk) or none."""
    rng = np.random.default_rng(30_000 + seed)
    num_heads, s_q = int(rng.choice([16, 64])), int(rng.integers(1, 4))
    page_size, B, topk = int(rng.choice([1, 16, 64])), 3, int(rng.choice([64, 128]))
    num_pages = max(2, 256 // page_size)
    tokens = num_pages * page_size
    used = rng.permutation(tokens)[: tokens // 2]
    rows = rng.standard_normal((tokens, 576)).astype(np.float32)
    rows[np.setdiff1d(np.arange(tokens), used)] = np.nan
    idx = rng.choice(used, (B, s_q, topk)).astype(np.int64)
    bad = rng.random(idx.shape) < rng.choice([0.0, 0.2, 0.9])
    idx[bad] = rng.choice([-1, -1, tokens, 2**31 - 1, -(2**31)], bad.sum())
    lens = None if rng.random() < 0.5 else jnp.asarray(rng.integers(-3, topk + 5, B), jnp.int32)
    to = lambda x: jnp.asarray(x, DTYPE)  # noqa: E731
    cache = rows.reshape(num_pages, page_size, 576)
    ckv, kpe = (to(cache), None) if rng.random() < 0.5 else (to(cache[..., :512]), to(cache[..., 512:]))
    ckv, kpe, fmt = quantized_mla(rng, ckv, kpe)
    q_nope = to(rng.standard_normal((B, s_q, num_heads, 512)))
    q_pe = to(rng.standard_normal((B, s_q, num_heads, 64)))
    return (q_nope, q_pe, ckv, kpe, jnp.asarray(idx.astype(np.int32))), dict(topk_lens=lens, **fmt)


@pytest.mark.parametrize("seed", range(CASES))
def test_mla_decode_sparse_adversarial(seed):  # on a GPU: 16-bit caches only (quantized_mla)
    args, kw = sparse_case(seed)
    sinks, _, _ = extras(seed, args[0].shape[2])
    out, lse = jax.jit(functools.partial(jaxpaged.mla_decode_sparse, scale=0.07, sinks=sinks, **kw))(*args)
    ref_out, ref_lse = reference.mla_decode_sparse(*args, scale=0.07, sinks=sinks, **kw)
    assert_close(out, ref_out, DTYPE, "out")
    assert_close(lse, ref_lse, DTYPE, "lse")
