"""Sparse (top-k) MLA decode against the reference: every cache format, -1 padding, out-of-range
and duplicate indices, NaN in the cache rows no index names, topk_lens, sinks, traced scale,
vmap; equal to dense mla_decode when the indices list a sequence's tokens. On Hopper the lists
run the wgmma kernel's gathering loaders (16-bit and fp8 combined caches) or the wide kernel's
gathering loader warpgroup (656-byte rows read with ds_dequant="bfloat16" or "float16", or with
fp8_math=True its fp8 mode; a long list split across partitions exercises its float partials and
the merge); elsewhere, and for exact 656-byte rows, the portable kernel."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpaged
from jaxpaged import _fp8, _sinks, reference
from cases import HOPPER, ON_GPU, assert_close
from fp8_math_checks import assert_exact_path, check_fp8_math

DTYPE = "bfloat16"
PAGES, PAGE = 12, 16


def _inputs(rng, batch, s_q, heads, topk, fmt="combined", pages=PAGES, page=PAGE):
    """Queries, a cache whose rows not named by any index hold NaN, and indices mixing valid
    slots, -1 padding, slots past the pool, int32 extremes and duplicates."""
    tokens = pages * page
    qn = jnp.asarray(rng.standard_normal((batch, s_q, heads, 512)), DTYPE)
    qp = jnp.asarray(rng.standard_normal((batch, s_q, heads, 64)), DTYPE)
    used = rng.permutation(tokens)[: tokens * 3 // 4]
    idx = rng.choice(used, (batch, s_q, topk)).astype(np.int64)  # duplicates likely
    junk = np.array([-1, -1, tokens, tokens + 5, 2**31 - 1, -(2**31)], np.int64)
    mask = rng.random(idx.shape) < 0.2
    idx[mask] = rng.choice(junk, mask.sum())
    idx[0, 0, :] = -1  # a row with no key
    rows = rng.standard_normal((tokens, 576)).astype(np.float32) * 0.5
    unused = np.setdiff1d(np.arange(tokens), used)
    rows[unused] = np.nan  # must never reach an output
    latent, rope = jnp.asarray(rows[:, :512]), jnp.asarray(rows[:, 512:])
    shape = (pages, page)
    if fmt == "combined":
        caches, kw = (jnp.asarray(rows, DTYPE).reshape(shape + (576,)), None), {}
    elif fmt == "split":
        caches, kw = (latent.astype(DTYPE).reshape(shape + (512,)), rope.astype(DTYPE).reshape(shape + (64,))), {}
    elif fmt == "fp8":
        caches, kw = (_fp8.quantize(jnp.asarray(rows), 0.01, jnp.float8_e4m3fn).reshape(shape + (576,)), None), \
            dict(kv_scale=0.01)
    else:  # DeepSeek-V3.2's 656-byte rows ("656 bf16" / "656 f16": read with bf16 / f16 dequantization)
        read = {"656": {}, "656 bf16": dict(ds_dequant="bfloat16"), "656 f16": dict(ds_dequant="float16")}[fmt]
        caches, kw = (_fp8.pack_ds_rows(latent, rope).reshape(shape + (656,)), None), read
    return qn, qp, caches, jnp.asarray(idx.astype(np.int32)), kw


def _check(out, lse, ref_out, ref_lse):
    assert_close(out, ref_out, DTYPE)
    assert_close(lse, ref_lse, DTYPE, "lse")


@pytest.mark.parametrize("fmt", ["combined", "split", "fp8", "656", "656 bf16", "656 f16"])
@pytest.mark.parametrize("heads, s_q", [(16, 1), (64, 2), (128, 4)])
def test_sparse_matches_reference(rng, fmt, heads, s_q):
    qn, qp, (ckv, kpe), idx, kw = _inputs(rng, 3, s_q, heads, 128, fmt)
    lens = jnp.array([128, 37, -4], jnp.int32)  # all, a prefix, none
    f = jax.jit(functools.partial(jaxpaged.mla_decode_sparse, scale=0.07, topk_lens=lens, **kw))
    out, lse = f(qn, qp, ckv, kpe, idx)
    ref_out, ref_lse = reference.mla_decode_sparse(qn, qp, ckv, kpe, idx, scale=0.07, topk_lens=lens, **kw)
    _check(out, lse, ref_out, ref_lse)
    assert np.isneginf(np.asarray(lse[2])).all() and not np.asarray(out[2], np.float32).any()
    assert np.isneginf(np.asarray(lse[0, 0])).all()  # row (0, 0) has only -1 indices
    assert np.isfinite(np.asarray(out, np.float32)).all()  # no NaN row leaked


@pytest.mark.parametrize("fmt", ["combined", "656 bf16", "656 f16"])
@pytest.mark.parametrize("batch, s_q, heads, topk", [(1, 1, 64, 2048), (24, 2, 32, 64)])
def test_sparse_long_and_many_lists(rng, fmt, batch, s_q, heads, topk):
    """One list long enough to be split across the schedule's partitions (and merged), and many
    short ones (a block's ring of tiles runs across lists): the gathering loaders' bookkeeping."""
    qn, qp, (ckv, kpe), idx, kw = _inputs(rng, batch, s_q, heads, topk, fmt)
    f = jax.jit(functools.partial(jaxpaged.mla_decode_sparse, scale=0.07, **kw))
    out, lse = f(qn, qp, ckv, kpe, idx)
    ref_out, ref_lse = reference.mla_decode_sparse(qn, qp, ckv, kpe, idx, scale=0.07, **kw)
    _check(out, lse, ref_out, ref_lse)
    assert np.isneginf(np.asarray(lse[0, 0])).all()  # row (0, 0) has only -1 indices
    assert np.isfinite(np.asarray(out, np.float32)).all()  # no NaN row leaked


def test_sparse_equals_dense_over_a_block_table(rng):
    qn, qp, (ckv, _), _, _ = _inputs(rng, 2, 2, 16, 8)
    ckv = jnp.where(jnp.isnan(ckv), 0, ckv)  # dense reads every token below its length
    table = jnp.asarray(rng.permutation(PAGES)[:8].reshape(2, 4), jnp.int32)
    lens = jnp.array([50, 17], jnp.int32)
    pos = jnp.arange(4 * PAGE)
    slots = table[:, pos // PAGE] * PAGE + pos % PAGE  # [B, 64] token j of each sequence
    idx = jnp.where(pos[None] < lens[:, None], slots, -1)[:, None, :].repeat(2, 1)
    dense = jaxpaged.mla_decode(qn, qp, ckv, None, lens, table, scale=0.07)
    sparse = jaxpaged.mla_decode_sparse(qn, qp, ckv, None, idx, scale=0.07)
    for d, s in zip(dense, sparse):
        np.testing.assert_allclose(np.asarray(d, np.float32), np.asarray(s, np.float32), rtol=1e-2, atol=1e-2)


def test_sparse_sinks_traced_scale_and_vmap(rng):
    qn, qp, (ckv, _), idx, _ = _inputs(rng, 2, 1, 16, 64)
    sinks = jnp.asarray(rng.standard_normal(16), jnp.float32)
    out, lse = jax.jit(lambda s: jaxpaged.mla_decode_sparse(qn, qp, ckv, None, idx, scale=s, sinks=sinks))(
        jnp.float32(0.05))
    _check(out, lse, *reference.mla_decode_sparse(qn, qp, ckv, None, idx, scale=0.05, sinks=sinks))
    # Mapped caches: instance i's indices stay in its own cache; out-of-range ones stay no key.
    caches = jnp.stack([ckv, ckv[::-1]])
    idxs = jnp.stack([idx, idx[::-1]])
    vout, vlse = jax.jit(jax.vmap(functools.partial(jaxpaged.mla_decode_sparse, qn, qp, scale=0.05),
                                  in_axes=(0, None, 0)))(caches, None, idxs)
    for i in range(2):
        _check(vout[i], vlse[i], *reference.mla_decode_sparse(qn, qp, caches[i], None, idxs[i], scale=0.05))


@pytest.mark.parametrize("fmt", ["combined", "656 f16"])
@pytest.mark.parametrize("page, topk", [(2, 64), (32, 128), (128, 64), (256, 4096)])
def test_sparse_page_sizes_and_topk_4096(rng, fmt, page, topk):
    """Pages of 2 to 256 tokens over one 512-token pool (the index names a slot, the page axis only
    lays the pool out), and lists of 4096 indices."""
    qn, qp, (ckv, kpe), idx, kw = _inputs(rng, 2, 1, 16, topk, fmt, pages=512 // page, page=page)
    lens = jnp.array([topk, topk // 3], jnp.int32)
    out, lse = jax.jit(functools.partial(jaxpaged.mla_decode_sparse, scale=0.07, topk_lens=lens, **kw))(
        qn, qp, ckv, kpe, idx)
    _check(out, lse, *reference.mla_decode_sparse(qn, qp, ckv, kpe, idx, scale=0.07, topk_lens=lens, **kw))
    assert np.isfinite(np.asarray(out, np.float32)).all()  # no NaN row leaked


def test_sparse_vmap_with_topk_lens_and_sinks_mapped(rng):
    """vmap over queries, indices, topk_lens and sinks together (one cache): each instance as the
    reference computes it alone."""
    qn, qp, (ckv, _), idx, _ = _inputs(rng, 4, 1, 16, 64)
    qns, qps, idxs = (x.reshape((2, 2) + x.shape[1:]) for x in (qn, qp, idx))
    lens = jnp.array([[64, 10], [0, 33]], jnp.int32)
    sinks = jnp.asarray(rng.standard_normal((2, 16)), jnp.float32)
    f = lambda a, b, i, n, sk: jaxpaged.mla_decode_sparse(a, b, ckv, None, i, scale=0.07, topk_lens=n,  # noqa: E731
                                                           sinks=sk)
    vout, vlse = jax.jit(jax.vmap(f))(qns, qps, idxs, lens, sinks)
    for i in range(2):
        _check(vout[i], vlse[i], *reference.mla_decode_sparse(qns[i], qps[i], ckv, None, idxs[i], scale=0.07,
                                                              topk_lens=lens[i], sinks=sinks[i]))


@pytest.mark.parametrize("q_dtype", ["float16"] + ([] if ON_GPU else ["float32"]))  # (float32: CPU only)
def test_sparse_fp8_traced_kv_scale_and_16_and_32_bit_queries(rng, q_dtype):
    """An e4m3 cache with float16 / float32 queries against the reference (out in q's dtype), and
    kv_scale traced (a jit argument) giving the bits of the static scale."""
    qn, qp, (ckv, kpe), idx, kw = _inputs(rng, 2, 2, 16, 64, "fp8")
    qn, qp = qn.astype(q_dtype), qp.astype(q_dtype)
    out, lse = jaxpaged.mla_decode_sparse(qn, qp, ckv, kpe, idx, scale=0.07, **kw)
    assert out.dtype == jnp.dtype(q_dtype)
    ref_out, ref_lse = reference.mla_decode_sparse(qn, qp, ckv, kpe, idx, scale=0.07, **kw)
    assert_close(out, ref_out, q_dtype)
    assert_close(lse, ref_lse, q_dtype, "lse")
    t_out, t_lse = jax.jit(lambda s: jaxpaged.mla_decode_sparse(qn, qp, ckv, kpe, idx, scale=0.07, kv_scale=s))(
        np.float32(kw["kv_scale"]))
    np.testing.assert_array_equal(np.asarray(out, np.float32), np.asarray(t_out, np.float32))
    np.testing.assert_array_equal(np.asarray(lse), np.asarray(t_lse))


@pytest.mark.parametrize("heads, s_q, topk, page", [(16, 1, 128, 16), (64, 2, 128, 16), (128, 1, 64, 2),
                                                    (128, 1, 2048, 64)])
def test_sparse_fp8_math(rng, heads, s_q, topk, page):
    """fp8_math over 656-byte rows (on Hopper the wide kernel's fp8 mode, any page size): -1
    padding, out-of-range and duplicate indices, NaN in the rows no index names, topk_lens (all, a
    prefix, none), a list long enough to be split across partitions (topk 2048) - within
    test_fp8's bound against the reference of the mode's rounded queries; elsewhere the exact
    path's bits."""
    qn, qp, (ckv, kpe), idx, _ = _inputs(rng, 3, s_q, heads, topk, "656", pages=PAGES * PAGE // page, page=page)
    lens = jnp.array([topk, 37, -4], jnp.int32)
    call = lambda fp8_math: jax.jit(functools.partial(jaxpaged.mla_decode_sparse, scale=0.07,  # noqa: E731
                                                      topk_lens=lens, fp8_math=fp8_math))(qn, qp, ckv, kpe, idx)
    out, lse = call(True)
    exact_out, exact_lse = call(False)
    assert np.isneginf(np.asarray(lse[2])).all() and not np.asarray(out[2], np.float32).any()
    if not HOPPER:
        assert_exact_path(out, lse, exact_out, exact_lse)
        return
    check_fp8_math(out, lse, exact_out, qn, qp, ckv, kpe, {}, None, None, 0.07, False, lists=(idx, lens))


def test_sparse_fp8_math_scales_across_tokens_sinks_and_vmap(rng):
    """fp8_math through vmap (queries and indices mapped, one cache) with sinks, over 656-byte rows
    whose group scales span 2^-8 .. 2^8 from token to token, all-zero groups (scale 1.0) and
    negative group-1 scales (values negated, as the reference reads them): each instance within
    the bound, the sinks rescaling it as they rescale any output; elsewhere the exact path's bits."""
    heads = 128
    qn, qp, (ckv16, _), idx, _ = _inputs(rng, 4, 1, heads, 256)
    rows = np.asarray(ckv16, np.float32).reshape(-1, 576)
    latent = rows[:, :512] * np.exp2(rng.integers(-8, 9, len(rows)).astype(np.float32))[:, None]
    latent[::7, 128:256] = 0
    raw = np.asarray(_fp8.pack_ds_rows(jnp.asarray(latent), jnp.asarray(rows[:, 512:]))).copy()
    scales = raw[:, 512:528].copy().view(np.float32)
    scales[::9, 1] *= -1
    raw[:, 512:528] = scales.view(np.uint8)
    ckv = jnp.asarray(raw.reshape(PAGES, PAGE, 656))
    qns, qps, idxs = (x.reshape((2, 2) + x.shape[1:]) for x in (qn, qp, idx))
    sinks = jnp.asarray(rng.standard_normal(heads), jnp.float32)

    def mapped(fp8_math, with_sinks):
        f = lambda a, b, i: jaxpaged.mla_decode_sparse(a, b, ckv, None, i, scale=0.07,  # noqa: E731
                                                       sinks=sinks if with_sinks else None, fp8_math=fp8_math)
        return jax.jit(jax.vmap(f))(qns, qps, idxs)

    out_s, lse_s = mapped(True, True)
    if not HOPPER:
        assert_exact_path(out_s, lse_s, *mapped(False, True))
        return
    out, lse = mapped(True, False)
    exact_out, _ = mapped(False, False)
    np.testing.assert_array_equal(np.asarray(lse_s), np.asarray(lse))  # (lse excludes the sink)
    for i in range(2):
        check_fp8_math(out[i], lse[i], exact_out[i], qns[i], qps[i], ckv, None, {}, None, None, 0.07, False,
                       lists=(idxs[i], None))
        assert_close(out_s[i], _sinks.apply_sinks(out[i], lse[i], sinks), DTYPE)


@pytest.mark.skipif(not HOPPER, reason="the wide kernel's blocks of many tiles (Hopper); elsewhere fp8_math is "
                                        "the exact path (test_sparse_fp8_math)")
@pytest.mark.parametrize("heads, batch, topk", [(128, 64, 2048), (16, 256, 512)])
def test_sparse_fp8_math_many_tiles_a_block(rng, heads, batch, topk):
    """Blocks of many tiles (the small cases above give each block one or two on 132 SMs): lists
    of lengths (97 b) % topk + 1 over a 4096-token pool whose tokens' latent is scaled by 2^-8 ..
    2^8, so a block's ring of raw buffers is reused, warpgroup 1 owns each pair's second tile, the
    per-group exponents grow across pairs, odd and even tile counts and whole and cut lists mix.
    The fp8 mode within the bound, and a second call bit-identical."""
    page = 64
    qn, qp, (ckv16, _), idx, _ = _inputs(rng, batch, 1, heads, topk, pages=4096 // page, page=page)
    rows = np.asarray(ckv16, np.float32).reshape(-1, 576)
    latent = rows[:, :512] * np.exp2(rng.integers(-8, 9, len(rows)).astype(np.float32))[:, None]
    ckv = _fp8.pack_ds_rows(jnp.asarray(latent), jnp.asarray(rows[:, 512:])).reshape(4096 // page, page, 656)
    lens = jnp.asarray((97 * np.arange(batch)) % topk + 1, jnp.int32)
    f = jax.jit(functools.partial(jaxpaged.mla_decode_sparse, scale=0.07, topk_lens=lens, fp8_math=True))
    out, lse = f(qn, qp, ckv, None, idx)
    again, again_lse = f(qn, qp, ckv, None, idx)
    np.testing.assert_array_equal(np.asarray(out, np.float32), np.asarray(again, np.float32))
    np.testing.assert_array_equal(np.asarray(lse), np.asarray(again_lse))
    exact_out, _ = jaxpaged.mla_decode_sparse(qn, qp, ckv, None, idx, scale=0.07, topk_lens=lens)
    check_fp8_math(out, lse, exact_out, qn, qp, ckv, None, {}, None, None, 0.07, False, lists=(idx, lens))


def test_sparse_errors_name_the_argument(rng):
    qn, qp, (ckv, _), idx, _ = _inputs(rng, 2, 1, 16, 64)
    call = functools.partial(jaxpaged.mla_decode_sparse, qn, qp, ckv, None, scale=0.1)
    with pytest.raises(ValueError, match=r"^indices must have shape \[B, s_q, topk\]; got shape \(2, 64\)"):
        call(idx[:, 0])
    with pytest.raises(ValueError, match=r"^indices must be int32; got float32"):
        call(idx.astype(jnp.float32))
    with pytest.raises(ValueError, match=r"^topk_lens must have shape \[B\] = \(2,\); got \(3,\)"):
        call(idx, topk_lens=jnp.zeros(3, jnp.int32))
    with pytest.raises(ValueError, match=r"^scale is required for mla_decode_sparse"):
        jaxpaged.mla_decode_sparse(qn, qp, ckv, None, idx, scale=None)
    with pytest.raises(ValueError, match=r"^fp8_math applies to fp8 caches"):
        call(idx, fp8_math=True)
    with pytest.raises(ValueError, match=r"^fp8_math must be a Python bool"):
        jaxpaged.mla_decode_sparse(qn, qp, _fp8.pack_ds_rows(ckv[..., :512], ckv[..., 512:]), None, idx, scale=0.1,
                                   fp8_math=1)
