"""Bad input raises ValueError that names the argument, before anything runs."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpaged
from cases import DTYPES, ON_GPU

BF16 = jnp.bfloat16


def paged_args(T=3, Hq=8, Hkv=2, D=64, P=4, ps=16, S=3, M=2, dtype=BF16):
    return dict(q=jnp.zeros((T, Hq, D), dtype), k_cache=jnp.zeros((P, ps, Hkv, D), dtype),
                v_cache=jnp.zeros((P, ps, Hkv, D), dtype), kv_lens=jnp.zeros((S,), jnp.int32),
                block_tables=jnp.zeros((S, M), jnp.int32))



def call(**overrides):
    args = paged_args()
    options = {k: overrides.pop(k) for k in list(overrides) if k not in args and k != "cu_q_lens"}
    args.update(overrides)
    return lambda: jaxpaged.paged_attention(**args, **options)


@pytest.mark.parametrize("overrides, match", [
    (dict(q=jnp.zeros((3, 8), BF16)), r"^q must have shape \[T, Hq, D\]"),
    (dict(q=jnp.zeros((3, 8, 64), jnp.int8)), r"^q must be bfloat16, float16 or float32"),
    (dict(k_cache=jnp.zeros((4, 16, 64), BF16)), r"^k_cache must have shape"),
    (dict(k_cache=jnp.zeros((4, 16, 2, 64), jnp.float16)), r"^k_cache must have the dtype of q"),
    (dict(v_cache=jnp.zeros((4, 16, 2, 128), BF16)), r"^v_cache must have the shape of k_cache"),
    (dict(q=jnp.zeros((3, 6, 64), BF16), k_cache=jnp.zeros((4, 16, 4, 64), BF16),
          v_cache=jnp.zeros((4, 16, 4, 64), BF16)), r"multiple of the caches' num_kv_heads"),
    (dict(q=jnp.zeros((3, 8, 96), BF16), k_cache=jnp.zeros((4, 16, 2, 96), BF16),
          v_cache=jnp.zeros((4, 16, 2, 96), BF16)), r"^q: head dim must be one of \(64, 128, 256\)"),
    (dict(k_cache=jnp.zeros((4, 16, 2, 128), BF16), v_cache=jnp.zeros((4, 16, 2, 128), BF16)),
     r"^k_cache: head dim must match q's 64"),
    (dict(k_cache=jnp.zeros((4, 12, 2, 64), BF16), v_cache=jnp.zeros((4, 12, 2, 64), BF16)),
     r"page_size must be a power of two from 1 to 256; got 12"),
    (dict(kv_lens=jnp.zeros((3,), jnp.int64 if jax.config.x64_enabled else jnp.float32)), r"^kv_lens must be int32"),
    (dict(kv_lens=jnp.zeros((3, 1), jnp.int32)), r"^kv_lens must have shape \[S\]"),
    (dict(block_tables=jnp.zeros((2, 2), jnp.int32)), r"^block_tables must have shape \[S, max_pages\] = \(3, 2\)"),
    (dict(block_tables=jnp.zeros((3,), jnp.int32)), r"^block_tables must have shape \[S, max_pages\]"),
    (dict(cu_q_lens=jnp.zeros((3,), jnp.int32)), r"^cu_q_lens must have shape \[S \+ 1\]"),
    (dict(q=jnp.zeros((4, 8, 64), BF16)), r"T \(4\) must equal len\(kv_lens\) \(3\)"),
    (dict(kv_layout="NDH"), r"^kv_layout must be 'NHD' or 'HND'"),
    (dict(soft_cap=0.0), r"^soft_cap must be a positive finite number"),
    (dict(sliding_window=0), r"^sliding_window must be a positive integer"),
])
def test_paged_attention_rejects(overrides, match):
    with pytest.raises(ValueError, match=match):
        call(**overrides)()


def test_paged_attention_hnd_layout_reads_heads_from_axis_1():
    args = paged_args()
    # [P, Hkv, ps, D] = (4, 2, 16, 64) read as NHD would have 16 kv heads: 8 % 16 != 0.
    with pytest.raises(ValueError, match="num_kv_heads"):
        jaxpaged.paged_attention(**{**args, "k_cache": jnp.zeros((4, 2, 16, 64), BF16),
                                    "v_cache": jnp.zeros((4, 2, 16, 64), BF16)})
    jaxpaged.paged_attention(**{**args, "k_cache": jnp.zeros((4, 2, 16, 64), BF16),
                                "v_cache": jnp.zeros((4, 2, 16, 64), BF16)}, kv_layout="HND")


def test_errors_also_raised_while_tracing():
    args = paged_args()
    args["q"] = jnp.zeros((3, 8, 96), BF16)
    with pytest.raises(ValueError, match="head dim"):
        jax.jit(jaxpaged.paged_attention).lower(*args.values())


def mla_args(B=2, s_q=1, H=16, P=4, ps=16, M=3, width=576, dtype=BF16):
    return dict(q_nope=jnp.zeros((B, s_q, H, 512), dtype), q_pe=jnp.zeros((B, s_q, H, 64), dtype),
                ckv_cache=jnp.zeros((P, ps, width), dtype), kpe_cache=None,
                kv_lens=jnp.zeros((B,), jnp.int32), block_tables=jnp.zeros((B, M), jnp.int32))


@pytest.mark.parametrize("overrides, match", [
    (dict(q_nope=jnp.zeros((2, 16, 512), BF16)), r"^q_nope must have shape \[B, s_q, Hq, 512\]"),
    (dict(q_nope=jnp.zeros((2, 1, 16, 128), BF16)), r"^q_nope must have shape \[B, s_q, Hq, 512\]"),
    (dict(q_pe=jnp.zeros((2, 1, 16, 32), BF16)), r"^q_pe must have shape \[B, s_q, Hq, 64\]"),
    (dict(q_pe=jnp.zeros((2, 1, 16, 64), jnp.float16)), r"^q_pe must have the dtype of q_nope"),
    (dict(ckv_cache=jnp.zeros((4, 16, 512), BF16)), r"^ckv_cache must be \[num_pages, page_size, 576\] \(or uint8 \[.., 656\]\) when kpe_cache is None"),
    (dict(ckv_cache=jnp.zeros((4, 16, 512), BF16), kpe_cache=jnp.zeros((4, 16, 32), BF16)),
     r"^kpe_cache must have shape \[num_pages, page_size, 64\]"),
    (dict(kpe_cache=jnp.zeros((4, 16, 64), BF16)), r"^kpe_cache must be None when ckv_cache holds the rope too"),
    (dict(ckv_cache=jnp.zeros((4, 16, 500), BF16), kpe_cache=jnp.zeros((4, 16, 64), BF16)),
     r"^ckv_cache's last dim must be 512"),
    (dict(ckv_cache=jnp.zeros((4, 24, 576), BF16)), r"page_size must be a power of two"),
    (dict(kv_lens=jnp.zeros((3,), jnp.int32)), r"^kv_lens must have shape \[B\] = \(2,\)"),
    (dict(block_tables=jnp.zeros((2, 3), jnp.float32)), r"^block_tables must be int32"),
])
def test_mla_decode_rejects(overrides, match):
    args = {**mla_args(), **overrides}
    with pytest.raises(ValueError, match=match):
        jaxpaged.mla_decode(**args, scale=0.1)


def test_mla_decode_requires_scale():
    with pytest.raises(ValueError, match="scale is required"):
        jaxpaged.mla_decode(**mla_args(), scale=None)


@pytest.mark.skipif(not ON_GPU, reason="float32 is supported on CPU; the GPU rejects it")
def test_float32_on_gpu_is_a_clear_error():
    args = paged_args(dtype=jnp.float32)
    with pytest.raises(ValueError, match="float32 runs on CPU only"):
        jax.jit(jaxpaged.paged_attention)(*args.values())


@pytest.mark.skipif(ON_GPU, reason="CPU runs float32")
def test_float32_runs_on_cpu():
    out = jaxpaged.paged_attention(*paged_args(dtype=jnp.float32).values())
    assert out.dtype == jnp.float32 and not np.isnan(np.asarray(out)).any()


@pytest.mark.parametrize("overrides, match", [
    (dict(q=jnp.zeros((3, 8, 0), BF16), k_cache=jnp.zeros((4, 16, 2, 0), BF16),
          v_cache=jnp.zeros((4, 16, 2, 0), BF16)), r"^q: head dim must be one of \(64, 128, 256\); got 0"),
    (dict(soft_cap=float("inf")), r"^soft_cap must be a positive finite number"),
    (dict(soft_cap=-1.0), r"^soft_cap must be a positive finite number"),
    (dict(scale=float("nan")), r"^scale must be a finite number"),
    (dict(scale="0.1"), r"^scale must be a finite number"),
    (dict(sliding_window=2.5), r"^sliding_window must be a positive integer"),
    (dict(block_tables=jnp.zeros((3, 2), jnp.bool_)), r"^block_tables must be int32; got bool"),
])
def test_paged_attention_rejects_options_and_indices(overrides, match):
    with pytest.raises(ValueError, match=match):
        call(**overrides)()


@pytest.mark.parametrize("name, value, match", [
    ("soft_cap", jnp.ones((2,), jnp.float32), r"^soft_cap must be a scalar; got a traced value of shape \(2,\)"),
    ("sliding_window", jnp.float32(8.0), r"^sliding_window must be an integer; got a traced value of dtype float32"),
    ("scale", jnp.bool_(True), r"^scale must be a real number; got a traced value of dtype bool"),
])
def test_traced_options_are_checked_at_trace_time(name, value, match):
    args = paged_args()
    f = jax.jit(lambda x: jaxpaged.paged_attention(*args.values(), **{name: x}))
    with pytest.raises(ValueError, match=match):
        f(value)
    g = jax.jit(lambda s: jaxpaged.mla_decode(*mla_args().values(), scale=s))
    with pytest.raises(ValueError, match=r"^scale must be a scalar; got a traced value of shape \(1,\)"):
        g(jnp.ones((1,), jnp.float32))


def test_key_positions_must_fit_32_bits():
    # Shapes only (eval_shape): a table whose max_pages * page_size reaches 2^31.
    q = jax.ShapeDtypeStruct((2, 8, 64), BF16)
    cache = jax.ShapeDtypeStruct((4, 16, 2, 64), BF16)
    lens = jax.ShapeDtypeStruct((2,), jnp.int32)
    table = jax.ShapeDtypeStruct((2, 2**27), jnp.int32)
    with pytest.raises(ValueError, match=r"^block_tables: max_pages \* page_size \(134217728 \* 16\) must be below 2\^31"):
        jax.eval_shape(jaxpaged.paged_attention, q, cache, cache, lens, table)
    mla = [jax.ShapeDtypeStruct((2, 1, 16, 512), BF16), jax.ShapeDtypeStruct((2, 1, 16, 64), BF16),
           jax.ShapeDtypeStruct((4, 64, 576), BF16), None, lens, jax.ShapeDtypeStruct((2, 2**25), jnp.int32)]
    with pytest.raises(ValueError, match=r"^block_tables: max_pages \* page_size"):
        jax.eval_shape(functools.partial(jaxpaged.mla_decode, scale=0.1), *mla)


def _small_paged_case():
    rng = np.random.default_rng(7)
    q = jnp.asarray(rng.standard_normal((3, 8, 64)), BF16)
    k = jnp.asarray(rng.standard_normal((4, 16, 2, 64)), BF16)
    v = jnp.asarray(rng.standard_normal((4, 16, 2, 64)), BF16)
    return q, k, v, [20, 5, 33], [[0, 1], [2, 3], [3, 1]]


def test_lists_and_wide_ints_are_index_arrays():
    q, k, v, lens, table = _small_paged_case()
    want = jaxpaged.paged_attention(q, k, v, jnp.asarray(lens, jnp.int32), jnp.asarray(table, jnp.int32))
    # Python lists, and numpy int64 arrays (what jnp makes of ints under jax_enable_x64).
    got = jaxpaged.paged_attention(q, k, v, lens, table)
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
    got = jaxpaged.paged_attention(q, k, v, np.asarray(lens, np.int64), np.asarray(table, np.int64))
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


def test_int64_under_x64_keeps_its_meaning():
    q, k, v, lens, table = _small_paged_case()
    want = jaxpaged.paged_attention(q, k, v, jnp.asarray(lens, jnp.int32), jnp.asarray(table, jnp.int32),
                                    return_lse=True)
    with jax.enable_x64(True):
        lens64 = jnp.asarray([20, 5, 2**40], jnp.int64)  # past the table: clamped to its 32 keys
        table64 = jnp.asarray([[0, 1], [2, 3], [3, 1 + 2**33]], jnp.int64)  # 2^33 + 1: out of range
        out, lse = jaxpaged.paged_attention(q, k, v, lens64, table64, return_lse=True)
    np.testing.assert_array_equal(np.asarray(out[:2], np.float32), np.asarray(want[0][:2], np.float32))
    assert np.isnan(np.asarray(lse[2])).all()  # row 2 sees page 1 + 2^33, which is no page


def test_huge_sliding_window_is_no_window():
    q, k, v, lens, table = _small_paged_case()
    lens, table = jnp.asarray(lens, jnp.int32), jnp.asarray(table, jnp.int32)
    want = jaxpaged.paged_attention(q, k, v, lens, table)
    got = jaxpaged.paged_attention(q, k, v, lens, table, sliding_window=2**40)
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
