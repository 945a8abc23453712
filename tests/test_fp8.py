"""fp8 KV caches for paged_attention (float8_e4m3fn / e5m2 with k_scale, v_scale) and mla_decode
(fp8 combined or latent-only with kv_scale; DeepSeek-V3.2's 656-byte rows) against the reference,
with the other options, traced scales and vmap. On a GPU: paged_attention's tile kernel (FP8
instances); MLA's wgmma kernel (Hopper, fp8 combined caches) or its portable kernel."""

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpaged
from jaxpaged import _fp8, _sinks, reference
from cases import HOPPER, ON_GPU, assert_close, mla_case, paged_case
from fp8_math_checks import assert_exact_path, check_fp8_math

Q_DTYPE = "bfloat16"
FP8 = ["float8_e4m3fn", "float8_e5m2"]


def _quantized(case, dtype, k_scale, v_scale):
    """The case's caches stored in fp8 (unused pages keep their NaN poison)."""
    return (_fp8.quantize(case.k_cache, k_scale, dtype), _fp8.quantize(case.v_cache, v_scale, dtype))


@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("decode, kv_layout", [(False, "NHD"), (True, "NHD"), (False, "HND")])
@pytest.mark.parametrize("head_dim, page_size", [(128, 16), (64, 1), (256, 16)])
def test_paged_fp8_cache_matches_reference(rng, dtype, decode, kv_layout, head_dim, page_size):
    case = paged_case(rng, q_lens=[1] * 3 if decode else [1, 6, 3], kv_lens=[45, 70, 20], num_q_heads=8,
                      num_kv_heads=2, head_dim=head_dim, page_size=page_size, dtype=Q_DTYPE, kv_layout=kv_layout,
                      decode=decode, pad_rows=0 if decode else 2)
    k8, v8 = _quantized(case, dtype, 0.02, 0.01)
    q, _, _, lens, table, cu = case.args()
    args = (q, k8, v8, lens, table) + (() if decode else (cu,))
    sinks = jnp.asarray(rng.standard_normal(8), jnp.float32)
    for kw in (dict(k_scale=0.02, v_scale=0.01),
               dict(k_scale=0.02, v_scale=0.01, soft_cap=30.0, sliding_window=17, sinks=sinks)):
        f = jax.jit(functools.partial(jaxpaged.paged_attention, kv_layout=kv_layout, return_lse=True, **kw))
        out, lse = f(*args)
        ref_out, ref_lse = reference.paged_attention(*args, kv_layout=kv_layout, return_lse=True, **kw)
        assert_close(out, ref_out, Q_DTYPE)
        assert_close(lse, ref_lse, Q_DTYPE, "lse")
    # Traced scales (a per-layer array in a scan, say) read on the device.
    g = jax.jit(lambda ks, vs: jaxpaged.paged_attention(*args, kv_layout=kv_layout, k_scale=ks, v_scale=vs))
    assert_close(g(jnp.float32(0.02), jnp.float32(0.01)),
                 reference.paged_attention(*args, kv_layout=kv_layout, k_scale=0.02, v_scale=0.01), Q_DTYPE)


def _check_fp8_gqa4_decode(rng, kv_lens, head_dim, dtype, spare_pages=3):
    """Pure decode of one query row per sequence (Hq 32, Hkv 8, pages of 16) over an fp8 cache of
    `dtype`, out and lse against the reference."""
    case = paged_case(rng, q_lens=[1] * len(kv_lens), kv_lens=kv_lens, num_q_heads=32, num_kv_heads=8,
                      head_dim=head_dim, page_size=16, dtype=Q_DTYPE, decode=True, spare_pages=spare_pages)
    k8, v8 = _quantized(case, dtype, 0.02, 0.01)
    q, _, _, lens, table = case.args()[:5]
    f = jax.jit(functools.partial(jaxpaged.paged_attention, k_scale=0.02, v_scale=0.01, return_lse=True))
    out, lse = f(q, k8, v8, lens, table)
    ref_out, ref_lse = reference.paged_attention(q, k8, v8, lens, table, k_scale=0.02, v_scale=0.01,
                                                 return_lse=True)
    assert_close(out, ref_out, Q_DTYPE)
    assert_close(lse, ref_lse, Q_DTYPE, "lse")


@pytest.mark.parametrize("head_dim", [128, 64, 256])
def test_paged_fp8_decode_over_several_waves(rng, head_dim):
    # fp8 pure decode with more blocks than the GPU holds at once and varied lengths: the register
    # path's blocks find their sequences in the longest-first order themselves (no tile list), in
    # the decode-transposed instance (GQA 4: no converted buffer, every tile transposed).
    kv_lens = list(rng.integers(0, 70, size=250))
    kv_lens[:2] = [300, 0]
    _check_fp8_gqa4_decode(rng, kv_lens, head_dim, "float8_e4m3fn", spare_pages=1)


@pytest.mark.parametrize("head_dim", [128, 64, 256])
def test_paged_fp8_decode_split_inside_one_wave(rng, head_dim):
    # 24 sequences x 8 KV heads = 192 blocks: one for every SM of an H100 or H200 (132) and at most
    # half the decode-transposed instance's resident blocks, so the launch splits every sequence's
    # keys as many ways as keep the grid in one wave (choose_kv_splits: 2-3 here); varied lengths
    # leave some splits without keys.
    kv_lens = list(rng.integers(0, 1500, size=24))
    kv_lens[:3] = [2048, 0, 1]
    _check_fp8_gqa4_decode(rng, kv_lens, head_dim, "float8_e5m2")


def test_paged_fp8_decode_occupancy_splits(rng):
    # 32 sequences x 8 KV heads = 256 blocks at head dim 256: more than half the decode-transposed
    # instance's 396 resident blocks on an H100 or H200, so no split keeps one wave; where the
    # device's bandwidth an SM outruns what its blocks stream (occupancy_kv_splits: an H200), the
    # launch runs 3 splits in two nearly full waves, elsewhere unsplit. Varied lengths leave some
    # splits without keys.
    kv_lens = list(rng.integers(0, 1500, size=32))
    kv_lens[:3] = [2048, 0, 1]
    _check_fp8_gqa4_decode(rng, kv_lens, 256, "float8_e4m3fn")


@pytest.mark.parametrize("page_size, dtype", [(16, "float8_e4m3fn"), (32, "float8_e5m2"), (64, "float8_e4m3fn"),
                                             (128, "float8_e5m2")])
@pytest.mark.parametrize("kv_layout", ["NHD", "HND"])
@pytest.mark.parametrize("head_dim", [128, 64, 256])
def test_paged_fp8_decode_keys_outside_the_range_never_leak(rng, page_size, dtype, kv_layout, head_dim):
    """fp8 pure decode with GQA 8 (the tile kernel's transposed register path on a GPU, at head dims
    64 and 256 launched without the converted buffer's shared memory): keys before the
    window, past the length (NaN in the cache here) or on a page id out of range must count for
    nothing, whatever a stage loads beside the keys it uses (written for session 48's TMA stages,
    whole page rows from a multiple of 64 keys, NOTES item 73 b; they were dropped, the cp.async
    stages pass it too). Lengths that end mid-page, long enough for several KV splits; NaN in every
    key before the window of sequence 0; an out-of-range page id in sequence 3 at key 100, inside
    the 250-key window (NaN rows for that sequence only) but outside the 77-key one."""
    kv_lens = [1000, 37, 0, 300, 64, 129]
    case = paged_case(rng, q_lens=[1] * 6, kv_lens=kv_lens, num_q_heads=16, num_kv_heads=2, head_dim=head_dim,
                      page_size=page_size, dtype=Q_DTYPE, kv_layout=kv_layout, decode=True)
    table = np.asarray(case.block_tables).copy()
    k, v = (np.array(c.astype(jnp.float32)) for c in (case.k_cache, case.v_cache))
    for key in range(kv_lens[0] - 250):
        page, slot = table[0, key // page_size], key % page_size
        at = (page, slot) if kv_layout == "NHD" else (page, slice(None), slot)
        k[at] = v[at] = np.nan
    table[3, 100 // page_size] = 10**6
    k8, v8 = _fp8.quantize(jnp.asarray(k), 0.02, dtype), _fp8.quantize(jnp.asarray(v), 0.01, dtype)
    args = (case.q, k8, v8, case.kv_lens, jnp.asarray(table))
    for kw in (dict(sliding_window=250), dict(sliding_window=77, soft_cap=20.0)):
        kw.update(kv_layout=kv_layout, k_scale=0.02, v_scale=0.01, return_lse=True)
        out, lse = jax.jit(functools.partial(jaxpaged.paged_attention, **kw))(*args)
        ref_out, ref_lse = reference.paged_attention(*args, **kw)
        assert_close(out, ref_out, Q_DTYPE)
        assert_close(lse, ref_lse, Q_DTYPE, "lse")
        nan_seqs = np.isnan(np.asarray(lse)).all(axis=1)
        assert list(nan_seqs) == [False, False, False, kw["sliding_window"] == 250, False, False]


@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("head_dim", [128, 64, 256])
def test_paged_fp8_queries_of_any_magnitude(rng, dtype, head_dim):
    """bf16 queries far outside float16's range, or spanning it within a head, on an fp8 cache
    (decode: the tile kernel's register path - with session 49's prepared patch, at head dims 64 and
    256 too, as transposed tiles - whose products run in float16 with the queries scaled by a power
    of two per row since session 30, NOTES items 50 k / 51 c): as close to the reference as
    ordinary queries."""
    case = paged_case(rng, q_lens=[1, 1], kv_lens=[300, 77], num_q_heads=8, num_kv_heads=2, head_dim=head_dim,
                      page_size=16, dtype=Q_DTYPE, decode=True)
    k8, v8 = _quantized(case, dtype, 0.02, 0.01)
    # Per query head (KV head 0's group: heads 0-3, KV head 1's: 4-7): 2^20, 2^-20, 0, and one head
    # whose elements run from 2^-40 to 2^15; then 2^20, 2^-20, 1 and such a head again.
    head_factors = np.array([2.0**20, 2.0**-20, 0.0, 1.0, 2.0**20, 2.0**-20, 1.0, 1.0], np.float32)
    factors = np.broadcast_to(head_factors[:, None], (8, head_dim)).copy()
    factors[3] = factors[7] = np.exp2(np.linspace(-40.0, 15.0, head_dim)).astype(np.float32)
    q = (case.q.astype(jnp.float32) * factors[None]).astype(case.q.dtype)
    args = (q, k8, v8, case.kv_lens, case.block_tables)
    f = jax.jit(functools.partial(jaxpaged.paged_attention, k_scale=0.02, v_scale=0.01, return_lse=True))
    out, lse = f(*args)
    ref_out, ref_lse = reference.paged_attention(*args, k_scale=0.02, v_scale=0.01, return_lse=True)
    assert_close(out, ref_out, Q_DTYPE)
    # (lse reaches ~1e6 for the 2^20 heads: float32's own relative precision bounds it there)
    np.testing.assert_allclose(np.asarray(lse), np.asarray(ref_lse), rtol=1e-5, atol=2e-3)


def test_paged_fp8_vmap_over_caches(rng):
    cases = [paged_case(rng, q_lens=[1] * 2, kv_lens=lens, num_q_heads=4, num_kv_heads=2, head_dim=64,
                        page_size=16, dtype=Q_DTYPE, decode=True) for lens in ([30, 50], [50, 30])]
    stack = lambda xs: jnp.stack(xs)  # noqa: E731
    k8 = stack([_quantized(c, "float8_e4m3fn", 0.05, 0.05)[0] for c in cases])
    v8 = stack([_quantized(c, "float8_e4m3fn", 0.05, 0.05)[1] for c in cases])
    q, lens, table = (stack([getattr(c, f) for c in cases]) for f in ("q", "kv_lens", "block_tables"))
    out = jax.vmap(functools.partial(jaxpaged.paged_attention, k_scale=0.05, v_scale=0.05))(q, k8, v8, lens, table)
    for i in range(2):
        assert_close(out[i], reference.paged_attention(q[i], k8[i], v8[i], lens[i], table[i], k_scale=0.05,
                                                       v_scale=0.05), Q_DTYPE)


@pytest.mark.parametrize("q_dtype", ["float16"] + ([] if ON_GPU else ["float32"]))  # (float32: CPU only)
def test_paged_fp8_with_16_and_32_bit_queries_and_default_scales(rng, q_dtype):
    """fp8 caches with float16 and float32 queries (out in q's dtype), and k_scale / v_scale left
    out: 1.0, the same bits as passing 1.0; the scales traced: the same bits as static ones."""
    case = paged_case(rng, q_lens=[1] * 3, kv_lens=[45, 70, 20], num_q_heads=8, num_kv_heads=2, head_dim=64,
                      page_size=16, dtype=q_dtype, decode=True)
    k8, v8 = _quantized(case, "float8_e5m2", 1.0, 1.0)
    q, _, _, lens, table, _ = case.args()
    out = jax.jit(jaxpaged.paged_attention)(q, k8, v8, lens, table)
    assert out.dtype == jnp.dtype(q_dtype)
    assert_close(out, reference.paged_attention(q, k8, v8, lens, table, k_scale=1.0, v_scale=1.0), q_dtype)
    ones = jax.jit(functools.partial(jaxpaged.paged_attention, k_scale=1.0, v_scale=1.0))(q, k8, v8, lens, table)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(ones))
    static = jaxpaged.paged_attention(q, k8, v8, lens, table, k_scale=0.5, v_scale=2.0)
    traced = jax.jit(lambda ks, vs: jaxpaged.paged_attention(q, k8, v8, lens, table, k_scale=ks, v_scale=vs))(
        np.float32(0.5), np.float32(2.0))
    np.testing.assert_array_equal(np.asarray(static), np.asarray(traced))


@pytest.mark.parametrize("q_dtype", ["float16"] + ([] if ON_GPU else ["float32"]))  # (float32: CPU only)
def test_mla_fp8_traced_kv_scale_and_16_and_32_bit_queries(rng, q_dtype):
    """mla_decode over an fp8 combined cache with float16 / float32 queries against the reference,
    and kv_scale traced (a jit argument) giving the bits of the static scale."""
    case = mla_case(rng, kv_lens=[0, 50, 130], s_q=1, num_heads=16, page_size=64, dtype=q_dtype, combined=True)
    ckv = _fp8.quantize(case.ckv_cache, 0.01, jnp.float8_e4m3fn)
    args = (case.q_nope, case.q_pe, ckv, None, case.kv_lens, case.block_tables)
    out, lse = jaxpaged.mla_decode(*args, scale=0.07, kv_scale=0.01)
    assert out.dtype == jnp.dtype(q_dtype)
    ref_out, ref_lse = reference.mla_decode(*args, scale=0.07, kv_scale=0.01)
    assert_close(out, ref_out, q_dtype)
    assert_close(lse, ref_lse, q_dtype, "lse")
    t_out, t_lse = jax.jit(lambda s: jaxpaged.mla_decode(*args, scale=0.07, kv_scale=s))(np.float32(0.01))
    np.testing.assert_array_equal(np.asarray(out), np.asarray(t_out))
    np.testing.assert_array_equal(np.asarray(lse), np.asarray(t_lse))


def _mla_caches(case, fmt):
    """The case's bf16 combined cache in another format: (ckv_cache, kpe_cache, kwargs)."""
    latent, rope = case.ckv_cache[..., :512], case.ckv_cache[..., 512:]
    if fmt.startswith("656"):  # "656 bf16" / "656 f16": read with bf16 / f16 dequantization (Hopper's paths)
        read = {"656": {}, "656 bf16": dict(ds_dequant="bfloat16"), "656 f16": dict(ds_dequant="float16")}[fmt]
        return _fp8.pack_ds_rows(latent, rope), None, read
    if fmt.startswith("fp8 combined"):
        dtype = jnp.float8_e5m2 if fmt.endswith("e5m2") else jnp.float8_e4m3fn
        return _fp8.quantize(case.ckv_cache, 0.01, dtype), None, dict(kv_scale=0.01)
    return _fp8.quantize(latent, 0.01, jnp.float8_e4m3fn), rope, dict(kv_scale=0.01)


def _latent_amax(case):
    """max |latent value| (the bf16 cache) over the keys each batch row reads: [batch]."""
    latent = np.abs(np.asarray(case.ckv_cache[..., :512], np.float32))
    page_size, table = latent.shape[1], np.asarray(case.block_tables)
    return np.array([latent[table[b, np.arange(n) // page_size], np.arange(n) % page_size].max(initial=0.0)
                     for b, n in enumerate(np.asarray(case.kv_lens))])


@pytest.mark.parametrize("fmt", ["656", "656 bf16", "656 f16", "fp8 combined", "fp8 combined e5m2",
                                 "fp8 latent + bf16 rope"])
@pytest.mark.parametrize("heads, s_q, page_size, causal, kv_lens", [
    (16, 2, 64, True, [0, 50, 130]),
    (128, 1, 1, False, [3, 40, 1]),
    (64, 1, 16, False, [2000, 7, 600]),  # long enough for KV splits
    # At most 16 query rows, pages of >= 64 (combined fp8: Hopper's narrow fp8 kernel), sequences cut
    # into pieces and merged, an empty one, one that ends inside its first tile.
    (16, 1, 64, False, [0, 1000, 4100, 63]),
    (8, 2, 128, True, [1, 65, 700]),
    # (the narrow kernel's row map with one head: 16 query tokens, each row its own causal end; and
    # 12 rows, so 4 of its 16 row slots stay unused)
    (1, 16, 64, True, [3, 64, 700]),
    (4, 3, 256, True, [0, 200, 1025]),
    (1, 3, 64, True, [2, 64, 300]),  # 3 rows: not a multiple of 4 (656 bf16: the wide kernel, 61 rows dead)
    # More query rows, pages of >= 64 (combined fp8: Hopper's wide fp8 kernel): 128 rows (two row
    # blocks) with cut sequences, an odd number of tiles, an empty one; 32 rows (half a row block
    # unused); 64 heads x 2 causal query tokens.
    (128, 1, 64, False, [0, 1000, 4100, 63, 129]),
    (32, 1, 128, False, [3, 64, 2000]),
    (64, 2, 64, True, [1, 700, 65]),
])
def test_mla_quantized_caches_match_reference(rng, fmt, heads, s_q, page_size, causal, kv_lens):
    case = mla_case(rng, kv_lens=kv_lens, s_q=s_q, num_heads=heads, page_size=page_size, dtype=Q_DTYPE,
                    combined=True)
    ckv, kpe, kw = _mla_caches(case, fmt)
    args = (case.q_nope, case.q_pe, ckv, kpe, case.kv_lens, case.block_tables)
    f = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, causal=causal, **kw))
    out, lse = f(*args)
    ref_out, ref_lse = reference.mla_decode(*args, scale=0.07, causal=causal, **kw)
    assert_close(out, ref_out, Q_DTYPE)
    assert_close(lse, ref_lse, Q_DTYPE, "lse")
    # Quantization error against the bf16 cache, per batch row. A value x is stored to half a step:
    # within rho*|x|, rho = 2^-4 for e4m3 (3 mantissa bits; 656's per-128 scales too) or 2^-3 for
    # e5m2, and within |x| - 4.48 where e4m3 saturates (448 * kv_scale). So a query that reads one
    # key is off by at most D, that error for the largest |x| its row reads (A), plus the output's
    # bf16 rounding, 2^-8 A. With more keys, the keys' rounding also moves the softmax weights, which
    # can add as much again: 2 D (a 3-key row of 128 heads: up to 1.75 D in 550 seeds). No key: 0.
    bf16_out, _ = reference.mla_decode(*case.args(), scale=0.07, causal=causal)
    err = np.max(np.abs(np.asarray(out, np.float32) - np.asarray(bf16_out, np.float32)), axis=(1, 2, 3))
    # (656 bf16: the dequantized value is rounded to bf16 too, another 2^-8 |x| at most; 656 f16: the
    # scale and the value rounded to f16, 2^-11 each)
    rho = 2.0**-3 if fmt.endswith("e5m2") else 2.0**-4 + {"656 bf16": 2.0**-8, "656 f16": 2.0**-10}.get(fmt, 0.0)
    top = float(jnp.finfo(ckv.dtype).max) * kw["kv_scale"] if "kv_scale" in kw else np.inf
    amax = _latent_amax(case)
    bound = np.where(np.asarray(kv_lens) > 1, 2, 1) * np.maximum(rho * amax, amax - top) + 2.0**-8 * amax
    assert np.all(err <= bound), (err, bound)
    vout, _ = jax.vmap(lambda qn: jaxpaged.mla_decode(qn, *args[1:], scale=0.07, causal=causal, **kw))(
        jnp.stack([case.q_nope, case.q_nope[::-1]]))
    assert_close(vout[0], ref_out, Q_DTYPE)


def test_mla_656_bf16_huge_latents_stay_finite(rng):
    """656-byte rows whose latents are ~1e34 (group scales ~1e31), read with bf16 dequantization by
    128 query rows in pages of 64 (on Hopper: the wide kernel). The reference's float32 scores stay
    finite, so the kernels' must: the wide kernel once scaled its bf16 queries by 2^k per row (up to
    2^14), which took such scores' float32 sums past the largest float (NOTES item 49 g)."""
    big = 1e34
    case = mla_case(rng, kv_lens=[3, 200, 65], s_q=1, num_heads=128, page_size=64, dtype=Q_DTYPE, combined=True)
    latent = np.asarray(case.ckv_cache[..., :512], np.float32) * big
    rows = _fp8.pack_ds_rows(latent, case.ckv_cache[..., 512:])
    args = (case.q_nope, case.q_pe, rows, None, case.kv_lens, case.block_tables)
    out, lse = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, ds_dequant="bfloat16"))(*args)
    ref_out, ref_lse = reference.mla_decode(*args, scale=0.07, ds_dequant="bfloat16")
    assert np.all(np.isfinite(np.asarray(ref_out, np.float32))) and np.all(np.isfinite(ref_lse))
    assert_close(np.asarray(out, np.float32) / big, np.asarray(ref_out, np.float32) / big, Q_DTYPE)
    # (the scores are ~1e34: lse relative to its size, well within float32 sums' rounding)
    np.testing.assert_allclose(np.asarray(lse), np.asarray(ref_lse), rtol=1e-4)


def test_mla_656_f16_huge_rope_keys_stay_finite(rng):
    """656-byte rows read with f16 dequantization (on Hopper: the wide kernel's f16 path) whose bf16
    rope keys are ~1e30, against query latents ~1e-6 and rope queries ~1: the reference's float32
    scores (~1e31) stay finite, so the kernels' must. The wide kernel scales each query row by 2^k
    into float16's range; with k from the latent alone (~2^34 here) the rope scores passed the
    largest float (NOTES item 68 g)."""
    case = mla_case(rng, kv_lens=[3, 200, 65], s_q=1, num_heads=32, page_size=64, dtype=Q_DTYPE, combined=True)
    rope = np.asarray(case.ckv_cache[..., 512:], np.float32) * 1e30
    rows = _fp8.pack_ds_rows(case.ckv_cache[..., :512], rope)
    q_nope = (np.asarray(case.q_nope, np.float32) * 1e-6).astype(case.q_nope.dtype)
    args = (jnp.asarray(q_nope), case.q_pe, rows, None, case.kv_lens, case.block_tables)
    out, lse = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, ds_dequant="float16"))(*args)
    ref_out, ref_lse = reference.mla_decode(*args, scale=0.07, ds_dequant="float16")
    assert np.all(np.isfinite(np.asarray(ref_out, np.float32))) and np.all(np.isfinite(ref_lse))
    assert_close(out, ref_out, Q_DTYPE)
    np.testing.assert_allclose(np.asarray(lse), np.asarray(ref_lse), rtol=1e-4)


@pytest.mark.parametrize("fmt", ["656 bf16", "656 f16"])
def test_mla_656_bf16_nan_bytes_extreme_scales_and_subnormals(rng, fmt):
    """656-byte rows read with bf16 (f16) dequantization by 32 query rows in pages of 64 (on Hopper: the
    wide kernel) against the reference, NaN pattern included. Each sequence holds one hard case:
    0: a key with e4m3 NaN bytes (0x7F, 0xFF) in its latent; 1: a key whose group 1 scale is 2^120
    over subnormal bytes (values near 2^111, finite); 2: a key with a NaN group scale; 3: one key
    whose whole latent is subnormal e4m3 bytes of both signs at scale 2^9 (the output is its values,
    +-1..7: a flushed subnormal shows as 0); 4: a key with an infinite group scale. (A fast decode
    of the rows must leave the first, second, third and fifth to an exact path: NOTES item 67.)"""
    case = mla_case(rng, kv_lens=[70, 130, 5, 1, 40], s_q=1, num_heads=32, page_size=64, dtype=Q_DTYPE,
                    combined=True)
    rows, _, kw = _mla_caches(case, fmt)
    raw = np.asarray(rows).copy()
    table = np.asarray(case.block_tables)

    def key(b, t):  # (page, slot) of sequence b's key t
        return table[b, t // 64], t % 64

    def set_scale(b, t, group, value):
        raw[key(b, t) + (slice(512 + 4 * group, 516 + 4 * group),)] = np.frombuffer(np.float32(value).tobytes(), np.uint8)

    raw[key(0, 10) + (5,)], raw[key(0, 10) + (300,)] = 0x7F, 0xFF
    raw[key(1, 20) + (slice(128, 256),)] = (np.arange(128) % 7 + 1) | ((np.arange(128) % 2) << 7)
    set_scale(1, 20, 1, 2.0**120)
    set_scale(2, 1, 0, np.nan)
    raw[key(3, 0) + (slice(0, 512),)] = (np.arange(512) % 7 + 1) | ((np.arange(512) // 7 % 2) << 7)
    for g in range(4):
        set_scale(3, 0, g, 2.0**9)
    set_scale(4, 7, 2, np.inf)
    rows = jnp.asarray(raw)
    args = (case.q_nope, case.q_pe, rows, None, case.kv_lens, case.block_tables)
    out, lse = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, **kw))(*args)
    ref_out, ref_lse = reference.mla_decode(*args, scale=0.07, **kw)
    for b in (0, 2, 3, 4):
        assert_close(out[b], ref_out[b], Q_DTYPE)
        assert_close(lse[b], ref_lse[b], Q_DTYPE, "lse")
    assert np.all(np.isnan(np.asarray(ref_out[0], np.float32))) and np.all(np.isnan(np.asarray(ref_out[2], np.float32)))
    values = (np.arange(512) % 7 + 1) * np.where(np.arange(512) // 7 % 2, -1.0, 1.0)
    np.testing.assert_array_equal(np.asarray(out[3], np.float32), np.broadcast_to(values, out[3].shape))
    assert_close(out[1], ref_out[1], Q_DTYPE)
    if fmt == "656 f16":  # (the 2^120 scale is infinite in f16: its key's values inf or NaN, 0 x inf)
        assert np.all(np.isnan(np.asarray(ref_out[1], np.float32)))
        return
    # Sequence 1: in the heads whose score of the huge key is positive, outputs near 2^113 and lse
    # near 2^112 (the suite's relative tolerance covers the outputs; lse relative to its size).
    assert np.max(np.abs(np.asarray(ref_out[1], np.float32))) > 2.0**100
    np.testing.assert_allclose(np.asarray(lse[1]), np.asarray(ref_lse[1]), rtol=1e-4, atol=2e-3)


def test_round_to_f16_is_ieee_float16():
    """The float16 reading's rounding (jaxpaged._fp8.round_to_f16, float32 arithmetic) against numpy's
    float16 conversion: random values over 2^-30 .. 2^20 and the edges (65504, the rounding point
    to inf 65520, the subnormal range and its boundaries, signed zeros, inf, NaN), eager and jitted."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(50000) * np.exp2(rng.integers(-30, 20, 50000))).astype(np.float32)
    edges = np.array([0.0, -0.0, 65504.0, 65519.996, 65520.0, -65520.0, 1e30, np.inf, -np.inf, np.nan,
                      2.0**-14, 2.0**-14 * (1 - 2.0**-11), 2.0**-24, 2.0**-25, 2.0**-25 * 1.0001, 3 * 2.0**-25,
                      2.0**-24 * 2.5, 6e-8, 1e-8, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11], np.float32)
    x = np.concatenate([x, edges, -edges])
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    for fn in (_fp8.round_to_f16, jax.jit(_fp8.round_to_f16)):
        got = np.asarray(fn(jnp.asarray(x)))
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), (x[~same][:5], got[~same][:5], want[~same][:5])


def test_mla_656_f16_reading_range_edges(rng):
    """656-byte rows read with f16 dequantization by 32 query rows in pages of 64 (on Hopper: the wide
    kernel's f16 path) where the reading leaves float16's normal range: 0: one key's value x scale
    past 65504 (scale 200 over the byte 448: +inf in float16, so NaN rows - a saturating multiply
    would give finite ones); 1: every key's group scales float16 subnormals (1.3 x 2^-20, rounded to
    21 x 2^-24), so most values are float16 subnormals (outputs ~1e-4: compared relative to their
    size, where a flush to zero would show); 2: scales 2^-16 x (1 + g / 7) per group g (subnormal
    scales, normal and subnormal products)."""
    case = mla_case(rng, kv_lens=[70, 130, 65], s_q=1, num_heads=32, page_size=64, dtype=Q_DTYPE, combined=True)
    rows, _, kw = _mla_caches(case, "656 f16")
    raw = np.asarray(rows).copy()
    table, lens = np.asarray(case.block_tables), np.asarray(case.kv_lens)

    def set_scale(b, t, group, value):
        at = (table[b, t // 64], t % 64, slice(512 + 4 * group, 516 + 4 * group))
        raw[at] = np.frombuffer(np.float32(value).tobytes(), np.uint8)

    raw[table[0, 0], 10, 3] = 0x7E  # (e4m3 448)
    set_scale(0, 10, 0, 200.0)
    for t in range(lens[1]):
        for g in range(4):
            set_scale(1, t, g, 1.3 * 2.0**-20)
    for t in range(lens[2]):
        for g in range(4):
            set_scale(2, t, g, 2.0**-16 * (1 + g / 7))
    rows = jnp.asarray(raw)
    args = (case.q_nope, case.q_pe, rows, None, case.kv_lens, case.block_tables)
    out, lse = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, **kw))(*args)
    ref_out, ref_lse = reference.mla_decode(*args, scale=0.07, **kw)
    assert np.all(np.isnan(np.asarray(ref_out[0], np.float32)))
    assert_close(out[0], ref_out[0], Q_DTYPE)
    for b in (1, 2):
        o, r = np.asarray(out[b], np.float32), np.asarray(ref_out[b], np.float32)
        top = np.max(np.abs(r))
        assert 0 < top < 2e-2 / 8  # (below the suite's absolute tolerance: the relative comparison is the test)
        np.testing.assert_allclose(o, r, rtol=2e-2, atol=2e-2 * top)
        assert_close(lse[b], ref_lse[b], Q_DTYPE, "lse")


@pytest.mark.parametrize("fmt", ["bf16", "fp8 combined", "fp8 combined e5m2"])
@pytest.mark.parametrize("heads", [4, 32])
def test_mla_row_without_keys_is_zero_beside_nan_values(rng, fmt, heads):
    """A causal query token that sees no key (s_q > kv_len) outputs 0 and lse -inf even when the
    keys the other tokens see hold NaN: its probabilities are 0, and 0 x NaN must not reach its
    output (the reference's rule: no key, out 0). On Hopper, 4 heads x 3 tokens take the narrow
    fp8 kernel, 32 heads the wide one, bf16 the wgmma kernel."""
    case = mla_case(rng, kv_lens=[1, 2], s_q=3, num_heads=heads, page_size=64, dtype=Q_DTYPE, combined=True)
    table = np.asarray(case.block_tables)
    if fmt == "bf16":
        ckv, kpe, kw = case.ckv_cache.at[table[:, 0], 0, :512].set(jnp.nan), None, {}
    else:
        ckv, kpe, kw = _mla_caches(case, fmt)
        # Key 0 of every sequence: NaN in its latent values (0x7F is NaN in e4m3 and in e5m2).
        raw = np.asarray(jax.lax.bitcast_convert_type(ckv, jnp.uint8)).copy()
        raw[table[:, 0], 0, :512] = 0x7F
        ckv = jax.lax.bitcast_convert_type(jnp.asarray(raw), ckv.dtype)
    args = (case.q_nope, case.q_pe, ckv, kpe, case.kv_lens, case.block_tables)
    out, lse = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, causal=True, **kw))(*args)
    ref_out, ref_lse = reference.mla_decode(*args, scale=0.07, causal=True, **kw)
    assert_close(out, ref_out, Q_DTYPE)
    assert_close(lse, ref_lse, Q_DTYPE, "lse")
    # (sequence 0, kv_len 1: tokens 0 and 1 see no key; sequence 1, kv_len 2: token 0 sees none)
    assert np.all(np.asarray(out[0, :2], np.float32) == 0) and np.all(np.asarray(out[1, 0], np.float32) == 0)
    assert np.all(np.isneginf(np.asarray(lse[0, :2]))) and np.all(np.isneginf(np.asarray(lse[1, 0])))


@pytest.mark.parametrize("heads, page_size", [(16, 64), (128, 1), (128, 64)])
def test_mla_fp8_queries_of_any_magnitude(rng, heads, page_size):
    """bf16 queries far outside float16's range, or spanning it within a row, on an fp8 cache: the
    Hopper kernel computes in float16 there (queries scaled by a power of two per row), and must
    agree with the reference as closely as for ordinary queries."""
    case = mla_case(rng, kv_lens=[300, 77], s_q=1, num_heads=heads, page_size=page_size, dtype=Q_DTYPE,
                    combined=True)
    ckv, kpe, kw = _mla_caches(case, "fp8 combined")
    # Per head: 2^20 (past float16's max once scaled by the keys), 2^-20, 0, 1, and one head whose
    # elements run from 2^-40 to 2^15 (head 5).
    factors = np.array([2.0**20, 2.0**-20, 0.0, 1.0][: heads] * (heads // 4), np.float32)
    spread = np.exp2(np.linspace(-40.0, 15.0, 576)).astype(np.float32)
    scale_nope = np.broadcast_to(factors[None, None, :, None], (1, 1, heads, 512)).copy()
    scale_pe = np.broadcast_to(factors[None, None, :, None], (1, 1, heads, 64)).copy()
    scale_nope[:, :, 5] = spread[:512]
    scale_pe[:, :, 5] = spread[512:]
    q_nope = (case.q_nope.astype(jnp.float32) * scale_nope).astype(case.q_nope.dtype)
    q_pe = (case.q_pe.astype(jnp.float32) * scale_pe).astype(case.q_pe.dtype)
    args = (q_nope, q_pe, ckv, kpe, case.kv_lens, case.block_tables)
    f = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, **kw))
    out, lse = f(*args)
    ref_out, ref_lse = reference.mla_decode(*args, scale=0.07, **kw)
    assert_close(out, ref_out, Q_DTYPE)
    # (lse reaches 1e5 for the 2^20 heads: float32's own relative precision bounds it there. On
    # Hopper the 16-head case runs the narrow fp8 kernel (unless JAXPAGED_MLA_FP8_NARROW=0), whose
    # scores come from fp8 tensor cores: about 12 significant bits relative to the row's largest
    # products (NOTES item 44; measured 4.8e-5 here), so lse agrees to 2^-12 relative there.)
    narrow = HOPPER and os.environ.get("JAXPAGED_MLA_FP8_NARROW") != "0" and heads <= 16 and page_size >= 64
    np.testing.assert_allclose(np.asarray(lse), np.asarray(ref_lse), rtol=2.0**-12 if narrow else 1e-5, atol=2e-3)


@pytest.mark.parametrize("call, match", [
    (lambda c, k8: jaxpaged.paged_attention(*c.args()[:5], k_scale=0.1), r"^k_scale applies to fp8 caches only"),
    (lambda c, k8: jaxpaged.paged_attention(c.q, k8, c.v_cache, *c.args()[3:5]),
     r"^v_cache must have the dtype of k_cache \(float8_e4m3fn\)"),
    (lambda c, k8: jaxpaged.paged_attention(c.q, k8, k8, *c.args()[3:5], k_scale=jnp.zeros(2)),
     r"^k_scale must be a finite number"),
])
def test_paged_fp8_errors_name_the_argument(rng, call, match):
    case = paged_case(rng, q_lens=[1], kv_lens=[5], num_q_heads=4, num_kv_heads=1, head_dim=64, page_size=16,
                      dtype=Q_DTYPE, decode=True)
    with pytest.raises(ValueError, match=match):
        call(case, case.k_cache.astype(jnp.float8_e4m3fn))


def test_mla_quantized_errors_name_the_argument(rng):
    case = mla_case(rng, kv_lens=[5], s_q=1, num_heads=16, page_size=16, dtype=Q_DTYPE, combined=True)
    rest = (case.kv_lens, case.block_tables)
    with pytest.raises(ValueError, match=r"^kv_scale applies to fp8 caches only; ckv_cache is bfloat16"):
        jaxpaged.mla_decode(*case.args(), scale=0.1, kv_scale=0.5)
    with pytest.raises(ValueError, match=r"^a uint8 ckv_cache holds DeepSeek-V3.2's 656-byte rows"):
        jaxpaged.mla_decode(case.q_nope, case.q_pe, jnp.zeros((4, 16, 576), jnp.uint8), None, *rest, scale=0.1)
    rows = jnp.zeros((4, 16, 656), jnp.uint8)
    with pytest.raises(ValueError, match=r"^ds_dequant must be one of \('float32', 'bfloat16', 'float16'\); got 'bf16'"):
        jaxpaged.mla_decode(case.q_nope, case.q_pe, rows, None, *rest, scale=0.1, ds_dequant="bf16")
    with pytest.raises(ValueError, match=r"^ds_dequant='bfloat16' applies to DeepSeek-V3.2's uint8 \[.., 656\] "
                                         r"rows only; ckv_cache is bfloat16"):
        jaxpaged.mla_decode(*case.args(), scale=0.1, ds_dequant="bfloat16")
    with pytest.raises(ValueError, match=r"^ds_dequant='bfloat16' needs bfloat16 \(or float32\) queries; q_nope is float16"):
        jaxpaged.mla_decode_sparse(case.q_nope.astype(jnp.float16), case.q_pe.astype(jnp.float16), rows, None,
                                   jnp.zeros((1, 1, 64), jnp.int32), scale=0.1, ds_dequant="bfloat16")


def test_direct_ffi_call_rejects_a_split_fp8_rope():
    # The public op never builds this call (its shape rule rejects a split fp8 rope); a direct FFI
    # call must get an error too, not a 16-bit read of 64-byte rope rows. (On the CPU handler: the
    # GPU handler's signature has a workspace result more.)
    bf16, f8 = jnp.bfloat16, jnp.float8_e4m3fn
    call = jax.ffi.ffi_call("jaxpaged_mla_decode", (jax.ShapeDtypeStruct((1, 1, 16, 512), bf16),
                                                    jax.ShapeDtypeStruct((1, 1, 16), jnp.float32)))
    with jax.default_device(jax.devices("cpu")[0]):
        q_nope, q_pe = jnp.zeros((1, 1, 16, 512), bf16), jnp.zeros((1, 1, 16, 64), bf16)
        ckv, kpe = jnp.zeros((2, 16, 512), f8), jnp.zeros((2, 16, 64), f8)
        lens, table = jnp.full((1,), 20, jnp.int32), jnp.zeros((1, 2), jnp.int32)
        options = jnp.zeros((0,), jnp.int32)  # (also the empty plan operand)
        with pytest.raises(Exception, match="split kpe_cache holds q's dtype"):
            jax.block_until_ready(call(q_nope, q_pe, ckv, kpe, lens, table, options, options, scale=np.float32(0.1),
                                       kv_scale=np.float32(1.0), ds_read=np.int32(0), fp8_math=np.int32(0),
                                       causal=np.int32(0),
                                       plan_rows=np.int32(0),
                                       plan_capacity=np.int32(0)))


# fp8_math (mla_decode over fp8 caches): a permission to compute in fp8. On Hopper the wide fp8
# kernel (bf16 queries, more than 16 query rows, combined cache in pages of >= 64) then rounds each
# query row to e4m3 at a power of two and the probabilities to e4m3; every other path computes
# exactly as without it.
WIDE_FP8_MATH = HOPPER and os.environ.get("JAXPAGED_MLA_FP8_WIDE") != "0"


@pytest.mark.parametrize("fmt", ["fp8 combined", "fp8 combined e5m2", "656", "656 f16"])
@pytest.mark.parametrize("heads, s_q, page_size, causal, kv_lens, scale", [
    (128, 1, 64, False, [0, 1000, 4100, 63, 129], 0.07),  # the wide kernel: cut sequences, an empty one
    (64, 2, 64, True, [1, 700, 65], 0.07),
    # large scores (log2 std ~17): the running maxima move after a sequence's first pair, so O and
    # its sums are rescaled after P's rounding
    (128, 1, 64, False, [2000, 700], 0.5),
    (16, 1, 64, False, [3, 1000], 0.07),                   # the narrow kernel: no fp8 mode
    (128, 1, 16, False, [3, 700], 0.07),                   # pages of 16: the wgmma kernel, no fp8 mode
])
def test_mla_fp8_math(rng, fmt, heads, s_q, page_size, causal, kv_lens, scale):
    case = mla_case(rng, kv_lens=kv_lens, s_q=s_q, num_heads=heads, page_size=page_size, dtype=Q_DTYPE,
                    combined=True)
    ckv, kpe, kw = _mla_caches(case, fmt)
    args = (case.q_nope, case.q_pe, ckv, kpe, case.kv_lens, case.block_tables)
    call = lambda fp8_math: jax.jit(functools.partial(jaxpaged.mla_decode, scale=scale, causal=causal,
                                                      fp8_math=fp8_math, **kw))(*args)
    out, lse = call(True)
    exact_out, exact_lse = call(False)
    if fmt.startswith("656"):  # (656-byte rows: the wide kernel's mode, any number of query rows)
        mode = HOPPER and page_size >= 64
    else:
        mode = WIDE_FP8_MATH and heads * s_q > 16 and page_size >= 64
    if not mode:  # a permission only: the same results where no kernel has the mode
        assert_exact_path(out, lse, exact_out, exact_lse)
        return
    check_fp8_math(out, lse, exact_out, case.q_nope, case.q_pe, ckv, kpe, kw, case.kv_lens, case.block_tables,
                    scale, causal)


@pytest.mark.parametrize("fmt", ["fp8 combined", "656"])
def test_mla_fp8_math_under_vmap_with_a_plan_and_sinks(rng, fmt):
    """fp8_math through vmap (queries mapped over one cache), a plan and sinks: where the mode runs,
    each instance keeps test_mla_fp8_math's bound and the sinks rescale it as they rescale any
    output; elsewhere the results are the exact path's."""
    heads, page, scale = 128, 64, 0.07
    case = mla_case(rng, kv_lens=[700, 65], s_q=1, num_heads=heads, page_size=page, dtype=Q_DTYPE, combined=True)
    ckv, kpe, kw = _mla_caches(case, fmt)
    other = mla_case(rng, kv_lens=[700, 65], s_q=1, num_heads=heads, page_size=page, dtype=Q_DTYPE, combined=True)
    qs_nope, qs_pe = jnp.stack([case.q_nope, other.q_nope]), jnp.stack([case.q_pe, other.q_pe])
    plan = jaxpaged.mla_decode_plan(case.kv_lens, case.block_tables, num_heads=heads, page_size=page)
    sinks = jnp.asarray(rng.standard_normal(heads), jnp.float32)

    def mapped(fp8_math, with_sinks):
        f = lambda qn, qp: jaxpaged.mla_decode(qn, qp, ckv, kpe, case.kv_lens, case.block_tables, scale=scale,  # noqa: E731
                                               plan=plan, sinks=sinks if with_sinks else None, fp8_math=fp8_math, **kw)
        return jax.jit(jax.vmap(f))(qs_nope, qs_pe)

    out_s, lse_s = mapped(True, True)
    if not (HOPPER if fmt == "656" else WIDE_FP8_MATH and heads > 16):  # a permission only
        exact_s, exact_lse_s = mapped(False, True)
        assert_exact_path(out_s, lse_s, exact_s, exact_lse_s)
        return
    out, lse = mapped(True, False)
    exact_out, _ = mapped(False, False)
    np.testing.assert_array_equal(np.asarray(lse_s), np.asarray(lse))  # (lse excludes the sink)
    for i in range(2):
        check_fp8_math(out[i], lse[i], exact_out[i], qs_nope[i], qs_pe[i], ckv, kpe, kw, case.kv_lens,
                        case.block_tables, scale, False)
        assert_close(out_s[i], _sinks.apply_sinks(out[i], lse[i], sinks), Q_DTYPE)


@pytest.mark.parametrize("heads", [16, 128])
def test_mla_656_fp8_math_with_scales_across_tokens(rng, heads):
    """656-byte rows whose group scales span 2^-8 .. 2^8 from token to token (each token's latent
    times a random power of two), the sequences' first page the smallest - so the mode's per-group
    exponents grow after a sequence's first pair and its O is rescaled -, and all-zero groups
    (scale 1.0): the fp8 mode within test_mla_fp8_math's bound, elsewhere the exact reading."""
    page, scale = 64, 0.07
    case = mla_case(rng, kv_lens=[700, 300, 64], s_q=1, num_heads=heads, page_size=page, dtype=Q_DTYPE,
                    combined=True)
    cache = np.asarray(case.ckv_cache, np.float32)
    k = rng.integers(-8, 9, cache.shape[:2]).astype(np.float32)
    table, lens = np.asarray(case.block_tables), np.asarray(case.kv_lens)
    k[table[:, 0]] = -8  # (each sequence's first page)
    latent = cache[..., :512] * np.exp2(k)[..., None]
    latent[:, ::7, 128:256] = 0  # every 7th slot's second group all zero
    ckv = _fp8.pack_ds_rows(jnp.asarray(latent), jnp.asarray(cache[..., 512:]))
    args = (case.q_nope, case.q_pe, ckv, None, case.kv_lens, case.block_tables)
    call = lambda fp8_math: jax.jit(functools.partial(jaxpaged.mla_decode, scale=scale,  # noqa: E731
                                                      fp8_math=fp8_math))(*args)
    out, lse = call(True)
    exact_out, exact_lse = call(False)
    if not HOPPER:
        assert_exact_path(out, lse, exact_out, exact_lse)
        return
    check_fp8_math(out, lse, exact_out, case.q_nope, case.q_pe, ckv, None, {}, case.kv_lens, case.block_tables,
                    scale, False)


@pytest.mark.parametrize("heads", [16, 128])
def test_mla_656_fp8_math_negative_and_nan_scales(rng, heads):
    """656-byte rows whose slot 9 of every page has a negative group 1 scale (finite: its values
    negated, as the reference reads them), and a third sequence with a NaN group 0 scale at its
    key 5: the fp8 mode keeps test_mla_fp8_math's bound on the first two sequences (negative
    factors in P^T, the scores' scale FMAs and E_g from |scale|) and the third is NaN in every row,
    as the reference's; elsewhere the exact reading."""
    page, scale = 64, 0.07
    case = mla_case(rng, kv_lens=[700, 300, 130], s_q=1, num_heads=heads, page_size=page, dtype=Q_DTYPE,
                    combined=True)
    raw = np.asarray(_fp8.pack_ds_rows(case.ckv_cache[..., :512], case.ckv_cache[..., 512:])).copy()
    scales = raw[..., 512:528].copy().view(np.float32)  # [pages, page, 4]
    scales[:, 9, 1] *= -1
    table = np.asarray(case.block_tables)
    scales[table[2, 0], 5, 0] = np.nan
    raw[..., 512:528] = scales.view(np.uint8)
    ckv = jnp.asarray(raw)
    args = (case.q_nope, case.q_pe, ckv, None, case.kv_lens, case.block_tables)
    call = lambda fp8_math: jax.jit(functools.partial(jaxpaged.mla_decode, scale=scale,  # noqa: E731
                                                      fp8_math=fp8_math))(*args)
    out, lse = call(True)
    exact_out, exact_lse = call(False)
    ref_out, _ = reference.mla_decode(*args, scale=scale)
    assert np.all(np.isnan(np.asarray(ref_out[2], np.float32))) and np.all(np.isnan(np.asarray(out[2], np.float32)))
    if not HOPPER:
        assert_exact_path(out, lse, exact_out, exact_lse)
        return
    check_fp8_math(out[:2], lse[:2], exact_out[:2], case.q_nope[:2], case.q_pe[:2], ckv, None, {},
                    case.kv_lens[:2], case.block_tables[:2], scale, False)


@pytest.mark.skipif(not HOPPER, reason="the wide kernel's blocks of many tiles (Hopper); elsewhere fp8_math is "
                                        "the exact path (test_mla_fp8_math)")
@pytest.mark.parametrize("fmt", ["fp8 combined", "656"])
def test_mla_fp8_math_many_tiles_a_block(rng, fmt):
    """Blocks of many tiles (test_mla_fp8_math's cases give each block one or two on 132 SMs): 32
    sequences of 1-4096 keys at 128 heads, so a block's ring of raw buffers is reused across pairs
    and sequences, with odd and even tile counts, whole and cut sequences. The fp8 mode within the
    bound, and a second call bit-identical."""
    if fmt == "fp8 combined" and not WIDE_FP8_MATH:
        pytest.skip("JAXPAGED_MLA_FP8_WIDE=0: the per-tensor fp8 cache takes no fp8 mode")
    kv_lens = list((331 * np.arange(32)) % 4096 + 1)
    case = mla_case(rng, kv_lens=kv_lens, s_q=1, num_heads=128, page_size=64, dtype=Q_DTYPE, combined=True)
    ckv, kpe, kw = _mla_caches(case, fmt)
    args = (case.q_nope, case.q_pe, ckv, kpe, case.kv_lens, case.block_tables)
    f = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, fp8_math=True, **kw))
    out, lse = f(*args)
    again, again_lse = f(*args)
    np.testing.assert_array_equal(np.asarray(out, np.float32), np.asarray(again, np.float32))
    np.testing.assert_array_equal(np.asarray(lse), np.asarray(again_lse))
    exact_out, _ = jaxpaged.mla_decode(*args, scale=0.07, **kw)
    check_fp8_math(out, lse, exact_out, case.q_nope, case.q_pe, ckv, kpe, kw, case.kv_lens, case.block_tables,
                   0.07, False)


def test_mla_fp8_math_errors_name_the_argument(rng):
    case = mla_case(rng, kv_lens=[3], s_q=1, num_heads=16, page_size=16, dtype=Q_DTYPE, combined=True)
    with pytest.raises(ValueError, match=r"^fp8_math applies to fp8 caches"):
        jaxpaged.mla_decode(*case.args(), scale=0.1, fp8_math=True)
    ckv, kpe, kw = _mla_caches(case, "fp8 combined")
    with pytest.raises(ValueError, match=r"^fp8_math must be a Python bool"):
        jaxpaged.mla_decode(case.q_nope, case.q_pe, ckv, kpe, case.kv_lens, case.block_tables, scale=0.1,
                            fp8_math=1, **kw)
