"""write_kv / write_mla_kv against the reference: every cache layout and format, skipped slots,
duplicates, quantization (saturation, NaN, the 656-byte rows' bytes), in-place under donation;
each with both implementations of the write (XLA scatter, the write_rows FFI kernel)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpaged
from jaxpaged import _fp8, reference

P, PAGE, HKV, D = 6, 16, 2, 64


@pytest.fixture(autouse=True, params=["scatter", "rows"])
def write_impl(request, monkeypatch):
    """Every test runs with both writes: the XLA scatter and the jaxpaged_write_rows kernel. The
    choice is read while tracing, and JAX keeps traces of a function (jax.jit(jaxpaged.write_kv)
    in two tests is one trace), so the caches are cleared: else a test's second run could reuse
    the first one's write."""
    monkeypatch.setattr(jaxpaged.cache_write, "WRITE_IMPL", request.param)
    jax.clear_caches()
    return request.param
CACHE_DTYPES = ["bfloat16", "float32", "float8_e4m3fn", "float8_e5m2"]


def _bits(x):
    x = np.asarray(x)
    return x.view(np.uint8 if x.dtype.itemsize == 1 else np.uint16 if x.dtype.itemsize == 2 else np.uint32)


def _cache(rng, shape, dtype):
    return jnp.asarray(rng.standard_normal(shape) * 2, jnp.float32).astype(dtype)


def _slots(rng, n):
    """n distinct slots in range, then -1 (padding), a slot past the cache and int32 max."""
    return np.concatenate([rng.permutation(P * PAGE)[:n], [-1, P * PAGE, 2**31 - 1]]).astype(np.int32)


@pytest.mark.parametrize("dtype", CACHE_DTYPES)
@pytest.mark.parametrize("kv_layout", ["NHD", "HND"])
def test_write_kv_matches_reference(rng, dtype, kv_layout):
    shape = (P, PAGE, HKV, D) if kv_layout == "NHD" else (P, HKV, PAGE, D)
    k, v = _cache(rng, shape, dtype), _cache(rng, shape, dtype)
    slots = _slots(rng, 21)
    k_new = jnp.asarray(rng.standard_normal((len(slots), HKV, D)) * 40, jnp.float32)
    v_new = jnp.asarray(rng.standard_normal((len(slots), HKV, D)), jnp.bfloat16)
    scales = dict(k_scale=0.5, v_scale=jnp.float32(0.02)) if "float8" in dtype else {}
    f = jax.jit(lambda *a: jaxpaged.write_kv(*a, kv_layout=kv_layout, **scales))
    k_before = _bits(k).copy()
    got = f(k, v, k_new, v_new, slots)
    np.testing.assert_array_equal(_bits(k), k_before)  # not donated: the input cache is untouched
    want = reference.write_kv(k, v, k_new, v_new, jnp.asarray(slots), kv_layout=kv_layout, **scales)
    for g, w, old in zip(got, want, (k, v)):
        assert g.dtype == old.dtype and g.shape == old.shape
        np.testing.assert_array_equal(_bits(g), _bits(w))
    # Untouched slots keep their bytes; written ones changed.
    written = np.zeros(P * PAGE, bool)
    written[slots[:21]] = True
    to_nhd = (lambda c: np.asarray(c)) if kv_layout == "NHD" else (lambda c: np.asarray(c).transpose(0, 2, 1, 3))
    flat = lambda c: _bits(to_nhd(c)).reshape(P * PAGE, -1)  # noqa: E731
    np.testing.assert_array_equal(flat(got[0])[~written], flat(k)[~written])


def test_fp8_quantization_saturates_rounds_and_keeps_nan():
    k = jnp.zeros((1, PAGE, 1, D), jnp.float8_e4m3fn)
    x = np.zeros((4, 1, D), np.float32)
    x[0, 0, :4] = [1000.0, -1000.0, 464.0, np.nan]  # saturate both ways; 464 ties to even (448)
    x[1, 0, :2] = [0.3, 17.0]
    out, _ = jaxpaged.write_kv(k, k, x, x, np.arange(4, dtype=np.int32), k_scale=1.0, v_scale=1.0)
    row0 = np.asarray(out[0, 0, 0, :4], np.float32)
    np.testing.assert_array_equal(row0[:3], [448.0, -448.0, 448.0])
    assert np.isnan(row0[3])
    np.testing.assert_array_equal(np.asarray(out[0, 1, 0, :2], np.float32), [0.3125, 16.0])
    halved, _ = jaxpaged.write_kv(k, k, x, x, np.arange(4, dtype=np.int32), k_scale=2.0)
    np.testing.assert_array_equal(np.asarray(halved[0, 1, 0, :2], np.float32), [0.15625, 8.0])


def test_fp8_e5m2_writes_saturate():
    """e5m2 has infinities, but a write saturates to its finite maximum (57344) like e4m3's."""
    k = jnp.zeros((1, PAGE, 1, D), jnp.float8_e5m2)
    x = np.zeros((1, 1, D), np.float32)
    x[0, 0, :5] = [1e6, -1e6, np.inf, -np.inf, 61440.0]  # (61440: halfway to the next power, rounds up)
    out, _ = jaxpaged.write_kv(k, k, x, x, np.zeros(1, np.int32), k_scale=1.0)
    np.testing.assert_array_equal(np.asarray(out[0, 0, 0, :5], np.float32), [57344.0, -57344.0, 57344.0, -57344.0,
                                                                              57344.0])


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("scale", [0.1, 3.7, 1 / 3, 448.0])
def test_fp8_quantization_rounds_the_float32_quotient(rng, dtype, scale):
    """write_kv's fp8 values are the float32 quotient value / scale rounded to nearest even (as
    numpy computes it), also on ties: values m x scale for every midpoint m of two fp8 values, and
    their float32 neighbours. (XLA makes the division a multiplication by the reciprocal, which
    put about 1 in 1,600 of these a step off.) Static and traced scales; e4m3 and e5m2."""
    fp8 = np.dtype(getattr(jnp, dtype))
    vals = np.sort(np.arange(256, dtype=np.uint8).view(fp8).astype(np.float32))
    vals = vals[np.isfinite(vals)]
    ties = (((vals[1:] + vals[:-1]) / 2) * np.float32(scale)).astype(np.float32)
    x = np.concatenate([ties, np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf)),
                        (rng.standard_normal(2000) * 30).astype(np.float32)])
    x = np.concatenate([x, np.zeros((-x.size) % D, np.float32)]).reshape(-1, 1, D)
    n = x.shape[0]
    want = np.clip(x / np.float32(scale), -float(jnp.finfo(fp8).max), float(jnp.finfo(fp8).max)).astype(fp8)
    cache = jnp.zeros((n // PAGE + 1, PAGE, 1, D), fp8)
    slots = np.arange(n, dtype=np.int32)
    static, _ = jaxpaged.write_kv(cache, cache, x, x, slots, k_scale=scale)
    traced, _ = jax.jit(lambda s: jaxpaged.write_kv(cache, cache, x, x, slots, k_scale=s))(np.float32(scale))
    for got in (static, traced):
        np.testing.assert_array_equal(_bits(got.reshape(-1, 1, D)[:n]), _bits(want))


def test_ds_rows_scale_is_the_float32_quotient(rng):
    """The 656-byte rows' group scale is float32(max|x|) / 448 as numpy divides (XLA had made it a
    multiplication by 1 / 448 on the CPU, and divides approximately on the GPU: about half the
    scales a step off). Groups' maxima over float32's exponents, plain and under vmap."""
    latent = (rng.standard_normal((200, 512)) * 3).astype(np.float32)
    latent *= np.exp2(rng.integers(-100, 100, (200, 4, 1))).astype(np.float32).repeat(128, -1).reshape(200, 512)
    rope = np.zeros((200, 64), np.float32)
    want = np.abs(latent.reshape(200, 4, 128)).max(-1) / np.float32(448)
    plain = np.asarray(_fp8.pack_ds_rows(latent, rope))
    mapped = np.asarray(jax.jit(jax.vmap(_fp8.pack_ds_rows))(latent.reshape(4, 50, 512), rope.reshape(4, 50, 64)))
    for rows in (plain, mapped.reshape(200, 656)):  # (under vmap the divisor must be batched too)
        np.testing.assert_array_equal(rows[:, 512:528].copy().view(np.float32), want)


def test_quotient_by_448_is_correctly_rounded(rng):
    """_fp8's a / 448 against numpy's on 1M float32 values of random bits (quotients normal), and on
    values next to products q x 448 of random q, where a step off is likeliest."""
    a = rng.integers(0x0D000000, 0x7F000000, 1 << 20, dtype=np.uint32).view(np.float32)
    q = rng.integers(0x01000000, 0x7B000000, 1 << 18, dtype=np.uint32).view(np.float32)
    near = (q * np.float32(448)).astype(np.float32)
    near = near[np.isfinite(near)]
    a = np.concatenate([a, near, np.nextafter(near, np.float32(np.inf)), np.nextafter(near, np.float32(0))])
    got = np.asarray(jax.jit(_fp8._quotient_by_448)(a))
    np.testing.assert_array_equal(got, a / np.float32(448))


@pytest.mark.parametrize("n", [3, 300])
def test_duplicate_slots_last_wins(rng, n):
    """Tokens naming one slot: the last is written, whole (a parallel write would mix them)."""
    k = jnp.zeros((P, PAGE, HKV, D), jnp.float32)
    slots = rng.integers(0, 8, n).astype(np.int32)  # n tokens onto 8 slots: many duplicates
    slots[rng.random(n) < 0.2] = -1
    new = jnp.asarray(rng.standard_normal((n, HKV, D)), jnp.float32)
    out, _ = jax.jit(jaxpaged.write_kv)(k, k, new, new, slots)
    want, _ = reference.write_kv(k, k, new, new, jnp.asarray(slots))
    np.testing.assert_array_equal(np.asarray(out), np.asarray(want))
    for slot in set(slots[slots >= 0].tolist()):
        last = np.flatnonzero(slots == slot)[-1]
        np.testing.assert_array_equal(np.asarray(out[0, slot]), np.asarray(new[last]))


def test_duplicate_slots_last_wins_mla(rng):
    ckv = jnp.zeros((P, PAGE, 576), jnp.bfloat16)
    slots = np.array([5, 9, 5, -1, 5, 9], np.int32)
    latent = jnp.asarray(rng.standard_normal((6, 512)), jnp.float32)
    rope = jnp.asarray(rng.standard_normal((6, 64)), jnp.float32)
    out, _ = jaxpaged.write_mla_kv(ckv, None, latent, rope, slots)
    want, _ = reference.write_mla_kv(ckv, None, latent, rope, jnp.asarray(slots))
    np.testing.assert_array_equal(_bits(out), _bits(want))
    np.testing.assert_array_equal(np.asarray(out[0, 5, :512], np.float32),
                                  np.asarray(latent[4].astype(jnp.bfloat16), np.float32))


def test_unique_slots_promise_skips_the_sort(rng):
    k = jnp.zeros((P, PAGE, HKV, D), jnp.bfloat16)
    slots = _slots(rng, 21)
    new = jnp.asarray(rng.standard_normal((len(slots), HKV, D)), jnp.bfloat16)
    f = jax.jit(lambda *a: jaxpaged.write_kv(*a, unique_slots=True))
    got = f(k, k, new, new, slots)
    want = reference.write_kv(k, k, new, new, jnp.asarray(slots))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(_bits(g), _bits(w))
    hlo = f.lower(k, k, new, new, slots).as_text()
    assert "stablehlo.sort" not in hlo
    assert "stablehlo.sort" in jax.jit(jaxpaged.write_kv).lower(k, k, new, new, slots).as_text()
    with pytest.raises(ValueError, match="unique_slots"):
        jaxpaged.write_kv(k, k, new, new, slots, unique_slots=jnp.bool_(True))


def test_donated_caches_are_updated_in_place(rng):
    k = jnp.zeros((P, PAGE, HKV, D), jnp.bfloat16)
    new = jnp.ones((2, HKV, D), jnp.bfloat16)
    f = jax.jit(jaxpaged.write_kv, donate_argnums=(0, 1))
    hlo = f.lower(k, k + 0, new, new, np.array([0, 1], np.int32)).compile().as_text()
    assert "input_output_alias" in hlo and "copy(" not in hlo.split("ENTRY")[-1]


@pytest.mark.parametrize("fmt", ["combined", "split", "656"])
def test_donated_mla_caches_are_updated_in_place(fmt):
    """write_mla_kv's 3-d caches, donated: no copy of a cache in the compiled write, with either
    implementation (the write_rows kernel once reshaped them to 4-d around its aliased call, and
    XLA then copied each cache twice: the cost grew with the cache)."""
    ckv = jnp.zeros((P, PAGE, 656), jnp.uint8) if fmt == "656" else jnp.zeros(
        (P, PAGE, 576 if fmt == "combined" else 512), jnp.bfloat16)
    kpe = jnp.zeros((P, PAGE, 64), jnp.bfloat16) if fmt == "split" else None
    slots = np.array([0, 1], np.int32)
    f = jax.jit(jaxpaged.write_mla_kv, donate_argnums=(0, 1) if kpe is not None else 0)
    hlo = f.lower(ckv, kpe, jnp.ones((2, 512)), jnp.ones((2, 64)), slots).compile().as_text()
    assert "input_output_alias" in hlo and "copy(" not in hlo.split("ENTRY")[-1]


@pytest.mark.parametrize("kv_layout", ["NHD", "HND"])
@pytest.mark.parametrize("shared_cache", [False, True])
def test_vmap_writes_each_instance(rng, shared_cache, kv_layout):
    """vmap over instances: each writes its own tokens into its own cache (or into a copy of one
    shared cache), as the instances written one by one."""
    n = 3
    shape = (P, PAGE, HKV, D) if kv_layout == "NHD" else (P, HKV, PAGE, D)
    k = _cache(rng, shape if shared_cache else (n,) + shape, "bfloat16")
    v = _cache(rng, shape if shared_cache else (n,) + shape, "bfloat16")
    new = jnp.asarray(rng.standard_normal((n, 5, HKV, D)), jnp.bfloat16)
    slots = np.stack([_slots(rng, 2) for _ in range(n)])
    axes = None if shared_cache else 0
    write = functools.partial(jaxpaged.write_kv, kv_layout=kv_layout)
    got_k, got_v = jax.jit(jax.vmap(write, in_axes=(axes, axes, 0, 0, 0)))(k, v, new, new * 2, slots)
    for i in range(n):
        ki, vi = (k, v) if shared_cache else (k[i], v[i])
        want_k, want_v = reference.write_kv(ki, vi, new[i], new[i] * 2, jnp.asarray(slots[i]), kv_layout=kv_layout)
        np.testing.assert_array_equal(_bits(got_k[i]), _bits(want_k))
        np.testing.assert_array_equal(_bits(got_v[i]), _bits(want_v))


@pytest.mark.parametrize("fmt", ["combined", "split", "656"])
@pytest.mark.parametrize("shared_cache", [False, True])
def test_vmap_writes_each_instance_mla(rng, shared_cache, fmt):
    """vmap of write_mla_kv (3-d caches: the write_rows op's one-head form) as the instances
    written one by one."""
    n = 3
    lead = () if shared_cache else (n,)
    if fmt == "656":
        ckv = jnp.asarray(rng.integers(0, 256, lead + (P, PAGE, 656)), jnp.uint8)
    else:
        ckv = _cache(rng, lead + (P, PAGE, 576 if fmt == "combined" else 512), "bfloat16")
    kpe = _cache(rng, lead + (P, PAGE, 64), "bfloat16") if fmt == "split" else None
    latent = jnp.asarray(rng.standard_normal((n, 5, 512)), jnp.float32)
    rope = jnp.asarray(rng.standard_normal((n, 5, 64)), jnp.float32)
    slots = np.stack([_slots(rng, 2) for _ in range(n)])
    axes = None if shared_cache else 0
    write = jax.vmap(lambda c, k, a, b, s: jaxpaged.write_mla_kv(c, k, a, b, s),
                     in_axes=(axes, axes if kpe is not None else None, 0, 0, 0))
    got = jax.jit(write)(ckv, kpe, latent, rope, slots)
    for i in range(n):
        ci = ckv if shared_cache else ckv[i]
        ki = None if kpe is None else (kpe if shared_cache else kpe[i])
        want = reference.write_mla_kv(ci, ki, latent[i], rope[i], jnp.asarray(slots[i]))
        np.testing.assert_array_equal(_bits(got[0][i]), _bits(want[0]))
        if kpe is not None:
            np.testing.assert_array_equal(_bits(got[1][i]), _bits(want[1]))
        else:
            assert got[1] is None


@pytest.mark.parametrize("tokens", [2, 8])
def test_auto_takes_the_kernel_for_large_writes_only(rng, monkeypatch, tokens):
    """WRITE_IMPL "auto": the write_rows kernel for writes of ROWS_MIN_BYTES or more per cache
    (here 8 tokens' rows), else the scatter; the result is the same either way."""
    monkeypatch.setattr(jaxpaged.cache_write, "WRITE_IMPL", "auto")
    monkeypatch.setattr(jaxpaged.cache_write, "ROWS_MIN_BYTES", 8 * HKV * D * 2)
    k = _cache(rng, (P, PAGE, HKV, D), "bfloat16")
    new = jnp.asarray(rng.standard_normal((tokens, HKV, D)), jnp.bfloat16)
    slots = jnp.asarray(rng.permutation(P * PAGE)[:tokens], jnp.int32)
    f = jax.jit(jaxpaged.write_kv)
    assert ("jaxpaged_write_rows" in f.lower(k, k, new, new, slots).as_text()) == (tokens == 8)
    got = f(k, k, new, new * 2, slots)
    want = reference.write_kv(k, k, new, new * 2, slots)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(_bits(g), _bits(w))


@pytest.mark.parametrize("kv_layout, page, head_dim", [("HND", 1, 64), ("NHD", 1, 24), ("HND", 4, 24),
                                                      ("NHD", 16, 8)])
def test_write_kv_odd_shapes(rng, kv_layout, page, head_dim):
    """Pages of one token (HND's heads then lie side by side), rows of 48 bytes (three 16-byte
    chunks), rows of 16 bytes (one chunk): each write matches the reference."""
    shape = (P, page, HKV, head_dim) if kv_layout == "NHD" else (P, HKV, page, head_dim)
    k = _cache(rng, shape, "bfloat16")
    v = _cache(rng, shape, "bfloat16")
    n = min(5, P * page)
    new_k = jnp.asarray(rng.standard_normal((n + 2, HKV, head_dim)), jnp.bfloat16)
    new_v = jnp.asarray(rng.standard_normal((n + 2, HKV, head_dim)), jnp.bfloat16)
    slots = jnp.asarray(np.concatenate([rng.permutation(P * page)[:n], [-1, P * page]]), jnp.int32)
    got = jax.jit(lambda *a: jaxpaged.write_kv(*a, kv_layout=kv_layout))(k, v, new_k, new_v, slots)
    want = reference.write_kv(k, v, new_k, new_v, slots, kv_layout=kv_layout)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(_bits(g), _bits(w))


def test_rows_need_16_byte_rows_and_auto_falls_back(rng, monkeypatch):
    """Rows of 8 bytes (fp8, D = 8): the kernel refuses them with a ValueError; "auto" writes them
    with the scatter instead."""
    cache = _cache(rng, (P, PAGE, HKV, 8), "float8_e4m3fn")
    new = jnp.asarray(rng.standard_normal((4, HKV, 8)), jnp.float32)
    slots = jnp.asarray([0, 5, 17, 40], jnp.int32)
    monkeypatch.setattr(jaxpaged.cache_write, "WRITE_IMPL", "rows")
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        jaxpaged.write_kv(cache, cache, new, new, slots)
    monkeypatch.setattr(jaxpaged.cache_write, "WRITE_IMPL", "auto")
    monkeypatch.setattr(jaxpaged.cache_write, "ROWS_MIN_BYTES", 0)
    got = jaxpaged.write_kv(cache, cache, new, new, slots)
    want = reference.write_kv(cache, cache, new, new, slots)
    np.testing.assert_array_equal(_bits(got[0]), _bits(want[0]))


def test_auto_decides_per_cache_for_split_mla_caches(rng, monkeypatch):
    """write_mla_kv's split caches differ in row size: "auto" decides for each (the latent rows
    here reach ROWS_MIN_BYTES, the rope rows do not)."""
    monkeypatch.setattr(jaxpaged.cache_write, "WRITE_IMPL", "auto")
    n = 8
    monkeypatch.setattr(jaxpaged.cache_write, "ROWS_MIN_BYTES", n * 512 * 2)
    ckv = _cache(rng, (P, PAGE, 512), "bfloat16")
    kpe = _cache(rng, (P, PAGE, 64), "bfloat16")
    ckv_new = jnp.asarray(rng.standard_normal((n, 512)), jnp.float32)
    kpe_new = jnp.asarray(rng.standard_normal((n, 64)), jnp.float32)
    slots = jnp.asarray(rng.permutation(P * PAGE)[:n], jnp.int32)
    f = jax.jit(jaxpaged.write_mla_kv)
    assert f.lower(ckv, kpe, ckv_new, kpe_new, slots).as_text().count("@jaxpaged_write_rows(") == 1
    got = f(ckv, kpe, ckv_new, kpe_new, slots)
    want = reference.write_mla_kv(ckv, kpe, ckv_new, kpe_new, slots)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(_bits(g), _bits(w))


MLA_FORMATS = [  # (ckv width, ckv dtype, kpe dtype or None)
    (512, "bfloat16", "bfloat16"), (512, "float8_e4m3fn", "bfloat16"), (576, "bfloat16", None),
    (576, "float8_e4m3fn", None), (576, "float32", None), (656, "uint8", None)]


@pytest.mark.parametrize("width, dtype, kpe_dtype", MLA_FORMATS)
def test_write_mla_kv_matches_reference(rng, width, dtype, kpe_dtype):
    if dtype == "uint8":
        ckv = jnp.asarray(rng.integers(0, 256, (P, PAGE, width)), jnp.uint8)
    else:
        ckv = _cache(rng, (P, PAGE, width), dtype)
    kpe = None if kpe_dtype is None else _cache(rng, (P, PAGE, 64), kpe_dtype)
    slots = _slots(rng, 30)
    ckv_new = jnp.asarray(rng.standard_normal((len(slots), 512)) * 3, jnp.bfloat16)
    ckv_new = ckv_new.at[0, :128].set(0)  # an all-zero group: scale 1.0 in the 656-byte rows
    kpe_new = jnp.asarray(rng.standard_normal((len(slots), 64)), jnp.bfloat16)
    kw = dict(kv_scale=0.05) if "float8" in dtype else {}
    got = jax.jit(lambda *a: jaxpaged.write_mla_kv(*a, **kw))(ckv, kpe, ckv_new, kpe_new, slots)
    want = reference.write_mla_kv(ckv, kpe, ckv_new, kpe_new, jnp.asarray(slots), **kw)
    assert (got[1] is None) == (kpe is None)
    for g, w in zip(got, want):
        if w is not None:
            np.testing.assert_array_equal(_bits(g), _bits(w))
    if width == 656:  # the row's bytes: e4m3 latent, 4 little-endian float32 scales, bf16 rope
        page, off = divmod(int(slots[0]), PAGE)
        row = np.asarray(got[0][page, off])
        scales = row[512:528].view("<f4")
        groups = np.abs(np.asarray(ckv_new[0], np.float32)).reshape(4, 128).max(axis=1)
        # max / 448 in float32; XLA may divide by multiplying with 1/448 (1 ulp from numpy).
        np.testing.assert_allclose(scales, np.where(groups > 0, groups / 448.0, 1.0), rtol=2.4e-7)
        np.testing.assert_array_equal(row[528:].view("<u2"), _bits(kpe_new[0]))
        latent, rope = _fp8.unpack_ds_rows(jnp.asarray(row))
        np.testing.assert_allclose(latent, np.asarray(ckv_new[0], np.float32), rtol=0.07, atol=1e-6)


@pytest.mark.parametrize("call, match", [
    (lambda k, n, s: jaxpaged.write_kv(k, k, n, n, s, k_scale=0.5), r"^k_scale applies to fp8 caches only"),
    (lambda k, n, s: jaxpaged.write_kv(k, k, n[:, :1], n, s), r"^k_new must have shape \[N, Hkv, D\]"),
    (lambda k, n, s: jaxpaged.write_kv(k, k[:, :8], n, n, s), r"^v_cache must match k_cache"),
    (lambda k, n, s: jaxpaged.write_kv(k, k, n, n, s[:1]), r"^slot_mapping must have shape \[N\]"),
    (lambda k, n, s: jaxpaged.write_kv(k, k, n, n, s.astype(np.float32)), r"^slot_mapping must be int32"),
    (lambda k, n, s: jaxpaged.write_kv(k, k, n, n, s, kv_layout="NDH"), r"^kv_layout must be"),
    (lambda k, n, s: jaxpaged.write_mla_kv(jnp.zeros((P, PAGE, 656), jnp.uint8), None, jnp.zeros((2, 512)),
                                           jnp.zeros((2, 64)), s, kv_scale=1.0), r"^kv_scale does not apply"),
    (lambda k, n, s: jaxpaged.write_mla_kv(jnp.zeros((P, PAGE, 600)), None, jnp.zeros((2, 512)),
                                           jnp.zeros((2, 64)), s), r"^ckv_cache must be \[P, page_size, 576\]"),
    (lambda k, n, s: jaxpaged.write_mla_kv(k, None, jnp.zeros((2, 512)), jnp.zeros((2, 64)), s),
     r"^ckv_cache must have shape \[P, page_size, W\] \(W = 512, 576 or 656\)"),
])
def test_write_errors_name_the_argument(call, match):
    k = jnp.zeros((P, PAGE, HKV, D), jnp.bfloat16)
    with pytest.raises(ValueError, match=match):
        call(k, jnp.zeros((2, HKV, D), jnp.bfloat16), np.array([0, 1], np.int32))
