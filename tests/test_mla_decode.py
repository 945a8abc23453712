"""jaxpaged.mla_decode against jaxpaged.reference.mla_decode."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpaged
from jaxpaged import reference
from cases import DTYPES, assert_close, mla_case


def check(case, dtype, step=None, **options):
    """Runs `step` (default: a fresh jit of mla_decode with `options`) on the case."""
    args = case.args()
    step = step or jax.jit(functools.partial(jaxpaged.mla_decode, **options))
    out, lse = step(*args)
    ref_out, ref_lse = reference.mla_decode(*args, **options)
    assert out.dtype == case.q_nope.dtype and lse.dtype == jnp.float32
    assert_close(out, ref_out, dtype, "out")
    assert_close(lse, ref_lse, dtype, "lse")
    return out, lse


SCALE = 1.0 / np.sqrt(192.0)  # DeepSeek-V3's: head dim 128 + rope 64 before absorption


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("combined", [False, True], ids=["split-cache", "combined-576"])
@pytest.mark.parametrize("page_size", [1, 16, 64, 128])  # (>= 64: the Hopper kernel's TMA loads)
def test_decode_layouts_and_page_sizes(rng, dtype, combined, page_size):
    case = mla_case(rng, kv_lens=[1, 70, 129, 0, 200], s_q=1, num_heads=16, page_size=page_size,
                    dtype=dtype, combined=combined)
    out, lse = check(case, dtype, scale=SCALE)
    assert np.all(np.asarray(lse[3]) == -np.inf) and np.all(np.asarray(out[3], np.float32) == 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("s_q", [1, 2, 3, 4])
@pytest.mark.parametrize("causal", [False, True])
def test_speculative_rows(rng, dtype, s_q, causal):
    case = mla_case(rng, kv_lens=[5, 90, 2, 33], s_q=s_q, num_heads=32, page_size=16, dtype=dtype,
                    combined=s_q % 2 == 0)
    check(case, dtype, scale=SCALE, causal=causal)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_heads", [128, 8, 20])
def test_head_counts(rng, dtype, num_heads):
    # 128 is DeepSeek's full head count; 8 and 20 leave a GPU block partly empty.
    case = mla_case(rng, kv_lens=[64, 17], s_q=2, num_heads=num_heads, page_size=64, dtype=dtype,
                    combined=True)
    check(case, dtype, scale=SCALE, causal=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_long_context_uses_splits(rng, dtype):
    case = mla_case(rng, kv_lens=[3000], s_q=1, num_heads=16, page_size=64, dtype=dtype, combined=True)
    check(case, dtype, scale=SCALE)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("page_size,bad_id", [(16, -3), (64, -3), (64, 10**6)])
def test_corrupt_page_id_gives_nan_for_its_batch_row(rng, dtype, page_size, bad_id):
    # (With pages of >= 64 tokens the Hopper kernel loads by TMA, which must zero-fill, not read,
    # a page outside the cache.)
    case = mla_case(rng, kv_lens=[40 * page_size // 16, 50 * page_size // 16], s_q=2, num_heads=16,
                    page_size=page_size, dtype=dtype, combined=False)
    table = np.array(case.block_tables)
    table[0, 1] = bad_id
    case.block_tables = jnp.asarray(table)
    _, lse = check(case, dtype, scale=SCALE, causal=True)
    assert np.all(np.isnan(np.asarray(lse[0]))) and np.all(np.isfinite(np.asarray(lse[1])))


@pytest.mark.parametrize("dtype", DTYPES)
def test_uneven_lengths_cut_into_pieces(rng, dtype):
    # On Hopper the KV work of the batch is cut into equal spans (one per group of blocks): long
    # sequences are split into pieces merged afterwards, short ones share a span, empty ones
    # (lengths 0) still get output 0 and lse -inf.
    lens = rng.integers(1, 5000, size=24)
    lens[[3, 10]] = 0
    case = mla_case(rng, kv_lens=[int(x) for x in lens], s_q=1, num_heads=64, page_size=64, dtype=dtype,
                    combined=True)
    out, lse = check(case, dtype, scale=SCALE)
    assert np.all(np.asarray(lse)[[3, 10]] == -np.inf) and np.all(np.asarray(out[3], np.float32) == 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_long_sequence_all_heads_speculative(rng, dtype):
    # Hq=128 x s_q=2: four 64-row blocks per span; one sequence is spread over every span.
    case = mla_case(rng, kv_lens=[9000], s_q=2, num_heads=128, page_size=64, dtype=dtype, combined=False)
    check(case, dtype, scale=SCALE, causal=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_heads,s_q", [(128, 1), (64, 2)])
def test_two_row_blocks_uneven_lengths_and_a_corrupt_page(rng, dtype, num_heads, s_q):
    # 128 query rows per sequence with pages of >= 64 tokens: on Hopper two 64-row blocks walk
    # each span's tiles (TMA loads). Uneven lengths make spans of several sequences and pieces;
    # one corrupt page id must poison only its own sequence, in both row blocks.
    lens = rng.integers(1, 1500, size=16)
    lens[[2, 9]] = 0
    lens[5] = 1000  # (past page 1, which is corrupt)
    case = mla_case(rng, kv_lens=[int(x) for x in lens], s_q=s_q, num_heads=num_heads, page_size=64,
                    dtype=dtype, combined=s_q == 1)
    table = np.array(case.block_tables)
    table[5, 1] = -7
    case.block_tables = jnp.asarray(table)
    out, lse = check(case, dtype, scale=SCALE, causal=s_q > 1)
    lse = np.asarray(lse)
    assert np.all(np.isnan(lse[5])) and np.all(np.isfinite(np.delete(lse, [2, 5, 9], axis=0)))
    assert np.all(lse[[2, 9]] == -np.inf) and np.all(np.asarray(out[2], np.float32) == 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_more_sequences_than_scheduler_threads(rng, dtype):
    lens = rng.integers(0, 200, size=300)
    case = mla_case(rng, kv_lens=[int(x) for x in lens], s_q=1, num_heads=16, page_size=16, dtype=dtype,
                    combined=True)
    check(case, dtype, scale=SCALE)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,length", [(150, 256), (40, 1000)], ids=["many-per-span", "one-per-span"])
def test_equal_lengths_with_a_corrupt_page(rng, dtype, batch, length):
    # Equal lengths: on Hopper the spans are cut at sequence ends, so one block walks several
    # whole sequences back to back (its loader runs ahead into the next one). A corrupt page id in
    # one of them must make only that sequence's rows NaN.
    case = mla_case(rng, kv_lens=[length] * batch, s_q=1, num_heads=64, page_size=16, dtype=dtype,
                    combined=False)
    table = np.array(case.block_tables)
    table[7, 3] = case.ckv_cache.shape[0] + 5
    case.block_tables = jnp.asarray(table)
    _, lse = check(case, dtype, scale=SCALE)
    lse = np.asarray(lse)
    assert np.all(np.isnan(lse[7])) and np.all(np.isfinite(np.delete(lse, 7, axis=0)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_jitted_call_on_new_buffers(rng, dtype):
    # A serving loop calls one compiled step with new arrays each time. On Hopper the call's copy
    # engine maps (TMA, pages >= 64) hold the cache's address, and XLA may replay the op from a
    # captured command buffer: each call must still read the cache it was given.
    # (same shapes, so one executable serves all four calls)
    cases = [mla_case(rng, kv_lens=[100, 300, 64], s_q=1, num_heads=16, page_size=64, dtype=dtype,
                      combined=True) for _ in range(2)]
    step = jax.jit(functools.partial(jaxpaged.mla_decode, scale=SCALE))
    for case in cases + cases:
        check(case, dtype, step, scale=SCALE)
