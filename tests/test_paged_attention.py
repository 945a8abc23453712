"""jaxpaged.paged_attention against jaxpaged.reference.paged_attention."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpaged
from jaxpaged import reference
from cases import DTYPES, assert_close, paged_case


def check(case, dtype, **options):
    args = case.args()
    out, lse = jax.jit(functools.partial(jaxpaged.paged_attention, return_lse=True, **options))(*args)
    ref_out, ref_lse = reference.paged_attention(*args, return_lse=True, **options)
    assert out.dtype == case.q.dtype and lse.dtype == jnp.float32
    assert_close(out, ref_out, dtype, "out")
    assert_close(lse, ref_lse, dtype, "lse")
    return out, lse


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads", [(4, 4), (8, 2), (16, 2), (8, 1), (12, 4), (32, 1)],
                         ids=lambda h: f"hq{h[0]}-hkv{h[1]}")
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_decode_gqa_and_head_dims(rng, dtype, heads, head_dim):
    page_size = {64: 1, 128: 16, 256: 64}[head_dim]
    kv_lens = list(rng.integers(1, 150, size=5)) + [page_size * 2]
    case = paged_case(rng, q_lens=[1] * 6, kv_lens=kv_lens, num_q_heads=heads[0], num_kv_heads=heads[1],
                      head_dim=head_dim, page_size=page_size, dtype=dtype, decode=True)
    check(case, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("page_size", [1, 2, 16, 64, 256])
@pytest.mark.parametrize("kv_layout", ["NHD", "HND"])
def test_decode_page_sizes_and_layouts(rng, dtype, page_size, kv_layout):
    kv_lens = [1, page_size, page_size + 1, 3 * page_size - 1, 300]
    case = paged_case(rng, q_lens=[1] * 5, kv_lens=kv_lens, num_q_heads=8, num_kv_heads=2,
                      head_dim=128, page_size=page_size, dtype=dtype, kv_layout=kv_layout, decode=True)
    check(case, dtype, kv_layout=kv_layout)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kv_layout", ["NHD", "HND"])
def test_ragged_decode_and_prefill_chunks(rng, dtype, kv_layout):
    # Decode tokens, prefill chunks (first chunk and later chunks), a chunk longer than a page,
    # an empty sequence, then padding rows that belong to no sequence.
    q_lens = [1, 7, 1, 33, 16, 0, 1, 5]
    kv_lens = [40, 7, 1, 100, 50, 20, 0, 300]
    case = paged_case(rng, q_lens=q_lens, kv_lens=kv_lens, num_q_heads=8, num_kv_heads=2, head_dim=128,
                      page_size=16, dtype=dtype, kv_layout=kv_layout, pad_rows=4)
    out, lse = check(case, dtype, kv_layout=kv_layout)
    pad = slice(sum(q_lens), None)
    assert np.all(np.asarray(out[pad], np.float32) == 0) and np.all(np.asarray(lse[pad]) == -np.inf)
    # The sequence with kv_len 0 and one query row sees no key.
    row = sum(q_lens[:6])
    assert np.all(np.asarray(lse[row]) == -np.inf) and np.all(np.asarray(out[row], np.float32) == 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads,head_dim", [((8, 2), 128), ((4, 4), 128), ((8, 2), 256), ((16, 1), 64)],
                         ids=lambda x: f"hq{x[0]}-hkv{x[1]}" if isinstance(x, tuple) else f"d{x}")
def test_ragged_long_chunks_with_splits(rng, dtype, heads, head_dim):
    # Chunks of many query rows (several 64-row tiles on the GPU, rows crossing tile edges), long
    # contexts beside short ones (so the GPU splits the KV range of a ragged call), padding rows.
    q_lens = [150, 1, 1, 70]
    kv_lens = [3000, 4000, 20, 70]
    case = paged_case(rng, q_lens=q_lens, kv_lens=kv_lens, num_q_heads=heads[0], num_kv_heads=heads[1],
                      head_dim=head_dim, page_size=16, dtype=dtype, pad_rows=3)
    out, _ = check(case, dtype)
    check(case, dtype, sliding_window=100, soft_cap=30.0)
    assert np.all(np.asarray(out[sum(q_lens):], np.float32) == 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prefill_longer_than_context_masks_early_rows(rng, dtype):
    # q_len > kv_len: the chunk's first rows are before the sequence start and see nothing.
    case = paged_case(rng, q_lens=[6, 3], kv_lens=[4, 30], num_q_heads=4, num_kv_heads=1, head_dim=64,
                      page_size=16, dtype=dtype)
    _, lse = check(case, dtype)
    assert np.all(np.asarray(lse[:2]) == -np.inf) and np.all(np.isfinite(np.asarray(lse[2:])))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decode", [True, False], ids=["decode", "ragged"])
def test_soft_cap_window_and_scale(rng, dtype, decode):
    q_lens = [1, 1, 1] if decode else [1, 9, 4]
    case = paged_case(rng, q_lens=q_lens, kv_lens=[200, 75, 9], num_q_heads=16, num_kv_heads=2,
                      head_dim=128, page_size=16, dtype=dtype, decode=decode)
    check(case, dtype, soft_cap=3.0)
    check(case, dtype, sliding_window=37)
    check(case, dtype, sliding_window=1)
    check(case, dtype, scale=0.3, soft_cap=20.0, sliding_window=64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_long_context_uses_splits(rng, dtype):
    # Few rows and a long context: the GPU launcher splits the KV range and merges the parts.
    case = paged_case(rng, q_lens=[1, 1], kv_lens=[5000, 1234], num_q_heads=8, num_kv_heads=1,
                      head_dim=128, page_size=64, dtype=dtype, decode=True)
    check(case, dtype)
    check(case, dtype, sliding_window=700)


@pytest.mark.parametrize("num_seqs, lengths, heads", [(120, "varied", (32, 32)), (128, "equal", (32, 32)),
                                                      (128, "zeros", (32, 32)), (120, "one bucket", (16, 16)),
                                                      (128, "varied", (64, 2)), (129, "varied", (32, 32)),
                                                      (250, "varied", (8, 8)), (600, "varied", (8, 8))])
def test_decode_batches_over_several_waves(rng, num_seqs, lengths, heads):
    # Pure decode with more blocks than the GPU holds at once (x 16-32 KV heads; x 2 at a GQA group
    # of 32). Up to 128 sequences (bf16) each block finds its sequence in the longest-first order
    # itself (no tile list): varied lengths, with empty sequences among them, take the bucket
    # search; equal ones, all empty, or all in the longest's bucket (255 / 256 keys) the sequence
    # order; a GQA group of 32 has large tiles, in sequence order. Past 128 the tile list. Each
    # against the reference, and the same with a plan (the list).
    hq, hkv = heads
    if lengths == "varied":
        kv_lens = list(rng.integers(0, 90, size=num_seqs))
        kv_lens[:3] = [0, 200, 1]
    elif lengths == "one bucket":  # (longest 256: 255 lands in bucket 0 of 256 as well)
        kv_lens = list(255 + rng.integers(0, 2, size=num_seqs))
        kv_lens[:2] = [255, 256]
    else:
        kv_lens = [37 if lengths == "equal" else 0] * num_seqs
    case = paged_case(rng, q_lens=[1] * num_seqs, kv_lens=kv_lens, num_q_heads=hq, num_kv_heads=hkv,
                      head_dim=64, page_size=16, dtype="bfloat16", decode=True, spare_pages=1)
    out, lse = check(case, "bfloat16")
    q, k, v, lens, table = case.args()[:5]
    plan = jaxpaged.paged_attention_plan(lens, table, num_q_heads=hq, num_kv_heads=hkv, page_size=16)
    out_p, lse_p = jax.jit(functools.partial(jaxpaged.paged_attention, return_lse=True))(
        q, k, v, lens, table, plan=plan)
    np.testing.assert_array_equal(np.asarray(out_p, np.float32), np.asarray(out, np.float32))
    np.testing.assert_array_equal(np.asarray(lse_p), np.asarray(lse))


@pytest.mark.parametrize("dtype", DTYPES)
def test_corrupt_page_id_gives_nan_rows_only_for_its_sequence(rng, dtype):
    case = paged_case(rng, q_lens=[1, 3, 1], kv_lens=[40, 50, 60], num_q_heads=4, num_kv_heads=2,
                      head_dim=64, page_size=16, dtype=dtype)
    table = np.asarray(case.block_tables).copy()
    table[1, 2] = 10**6  # sequence 1's third page (keys 32..47) is out of range
    case.block_tables = jnp.asarray(table)
    out, lse = check(case, dtype)
    lse = np.asarray(lse)
    assert np.all(np.isnan(lse[1:4])) and np.all(np.isfinite(lse[[0, 4]]))


def test_lens_larger_than_table_are_clamped(rng):
    dtype = DTYPES[0]
    case = paged_case(rng, q_lens=[1, 1], kv_lens=[20, 30], num_q_heads=4, num_kv_heads=2, head_dim=64,
                      page_size=16, dtype=dtype, decode=True)
    table = np.array(case.block_tables)
    table[:, -1] = table[:, 0]  # make every entry valid so clamping, not junk, decides
    case.block_tables = jnp.asarray(table)
    # Clamped to capacity, every slot is visible, poisoned ones too: make them ordinary values.
    case.k_cache, case.v_cache = jnp.nan_to_num(case.k_cache), jnp.nan_to_num(case.v_cache)
    case.kv_lens = jnp.asarray([10**6, -5], jnp.int32)
    out, lse = check(case, dtype)
    assert np.isfinite(np.asarray(lse[0])).all() and np.all(np.asarray(lse[1]) == -np.inf)


def test_decreasing_cu_q_lens_gives_empty_sequences(rng):
    # Issue 15's repro: on the GPU the overlapping sequences once made more tiles than the list held.
    # Rule: cu clamped to [0, T], then made non-decreasing (running max): here sequences 0, 2 and 4
    # own rows 0-31 / nothing / nothing, 1, 3 and 5 nothing... then rows 32-63.
    dtype = DTYPES[0]
    case = paged_case(rng, q_lens=[64], kv_lens=[70], num_q_heads=8, num_kv_heads=1, head_dim=64,
                      page_size=16, dtype=dtype)
    table = np.tile(np.asarray(case.block_tables)[:1], (6, 1))
    case.block_tables = jnp.asarray(table)
    case.kv_lens = jnp.asarray([70, 50, 70, 50, 70, 50], jnp.int32)
    case.cu_q_lens = jnp.asarray([0, 32, 0, 32, 0, 32, 64], jnp.int32)
    out, lse = check(case, dtype)
    # cu becomes [0, 32, 32, 32, 32, 32, 64]: rows 32..63 belong to sequence 5 (kv_len 50).
    assert np.all(np.isfinite(np.asarray(lse)))
    again, _ = check(case, dtype)  # and the same every run (no racing writers)
    np.testing.assert_array_equal(np.asarray(out, np.float32), np.asarray(again, np.float32))


def test_bad_page_poisons_only_the_rows_that_see_it(rng):
    # Issue 15's repro: the GPU tile kernel once made every row of the tile NaN; only the rows that
    # see the bad page are NaN, on every platform.
    dtype = DTYPES[0]
    case = paged_case(rng, q_lens=[1, 4, 1], kv_lens=[20, 19, 30], num_q_heads=4, num_kv_heads=2,
                      head_dim=64, page_size=16, dtype=dtype)
    table = np.asarray(case.block_tables).copy()
    table[1, 1] = 99  # sequence 1's keys 16-18 are on page 99, out of range
    case.block_tables = jnp.asarray(table)
    case.cu_q_lens = jnp.asarray([0, 1, 5, 6], jnp.int32)
    _, lse = check(case, dtype)
    # Sequence 1's rows see keys up to 15, 16, 17, 18: row 1 sees only its first page, rows 2-4
    # reach page 99.
    nan_rows = np.isnan(np.asarray(lse)).all(axis=1)
    np.testing.assert_array_equal(nan_rows, [False, False, True, True, True, False])
