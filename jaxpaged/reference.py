"""Plain-jnp definitions of jaxpaged's ops: the semantics every kernel must reproduce.

They are exact (float32 math) and memory-bounded (rows are processed in chunks with lax.map), so
they double as a slow fallback anywhere JAX runs. Tests compare every kernel against them.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from jaxpaged import _fp8

# Rows gathered at once are capped so that their float32 K/V copies stay near this many bytes.
_CHUNK_BYTES = 1 << 28


def _rows_per_chunk(bytes_per_row: int) -> int:
    return max(1, _CHUNK_BYTES // max(bytes_per_row, 1))


def paged_attention(q, k_cache, v_cache, kv_lens, block_tables, cu_q_lens=None, *, scale=None,
                    soft_cap=None, sliding_window=None, kv_layout="NHD", return_lse=False, sinks=None,
                    k_scale=None, v_scale=None):
    """Reference paged attention. The rule, for query row t:

    * Row t belongs to sequence s when cu[s] <= t < cu[s+1], with cu = clip(cu_q_lens, 0, T) made
      non-decreasing by a running maximum (a decreasing entry gives an empty sequence;
      cu_q_lens=None means cu = arange(S+1): row s is sequence s's one decode token). Rows owned
      by no sequence are padding: output 0, lse -inf.
    * With q_len = cu[s+1] - cu[s], p = t - cu[s] and L = clip(kv_lens[s], 0, max_pages*page_size),
      the query chunk is the last q_len tokens of the sequence, so the row sees keys j with
      0 <= j < L and j <= L - q_len + p; with sliding_window=W also j > L - q_len + p - W (a
      traced W below 1 means no window; the public op rejects a static one).
    * Key j of sequence s lives in page block_tables[s, j // page_size], slot j % page_size. Only
      pages holding visible keys are read. If such a page id is outside [0, num_pages), the row's
      output and lse are NaN (a device op cannot raise; NaN is the loud signal).
    * score = scale * q.k (scale defaults to 1/sqrt(D)); with soft_cap=c, score = c*tanh(score/c)
      (a traced c that is not positive and finite means no cap; the public op rejects a static one).
      Output = softmax(scores) @ V in q's dtype; lse = log(sum(exp(scores))) in float32. A row
      that sees no key gets output 0 and lse -inf.
    * fp8 caches: a key is k_cache.astype(float32) * k_scale, a value v_cache.astype(float32) *
      v_scale (scales default 1.0); then the same math.
    * sinks [Hq]: head h's softmax denominator gains exp(sinks[h]) (a key with that score and a
      zero value): out = sum_j exp(s_j) v_j / (sum_j exp(s_j) + exp(sinks[h])); lse excludes it.
    """
    T, Hq, D = q.shape
    if kv_layout == "HND":
        k_cache, v_cache = k_cache.transpose(0, 2, 1, 3), v_cache.transpose(0, 2, 1, 3)
    num_pages, page_size, Hkv, _ = k_cache.shape
    S, max_pages = block_tables.shape
    capacity = max_pages * page_size
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    fp8 = _fp8.is_fp8(k_cache.dtype)
    k_mul = (1.0 if k_scale is None else k_scale) if fp8 else 1.0
    v_mul = (1.0 if v_scale is None else v_scale) if fp8 else 1.0

    rows = jnp.arange(T, dtype=jnp.int32)
    if cu_q_lens is None:
        seq, valid = rows, jnp.ones((T,), bool)
        q_begin, q_len = rows, jnp.ones((T,), jnp.int32)
    else:
        cu = jax.lax.cummax(jnp.clip(cu_q_lens, 0, T))
        seq = jnp.clip(jnp.searchsorted(cu[:S], rows, side="right").astype(jnp.int32) - 1, 0, S - 1)
        q_begin, q_end = cu[seq], cu[seq + 1]
        valid = (rows >= q_begin) & (rows < q_end)
        q_len = q_end - q_begin
    L = jnp.clip(kv_lens[seq], 0, capacity)
    last = L - q_len + (rows - q_begin)                  # newest visible key
    end = jnp.where(valid, jnp.minimum(L, last + 1), 0)  # visible keys: [begin, end)
    begin = jnp.zeros_like(last)
    if sliding_window is not None:
        w = sliding_window if hasattr(sliding_window, "dtype") else min(int(sliding_window), 2**31 - 1)
        w = jnp.clip(jnp.asarray(w), 0, 2**31 - 1).astype(jnp.int32)
        begin = jnp.where((w >= 1) & (last + 1 > w), last + 1 - w, 0)  # no int32 overflow

    key_pos = jnp.arange(capacity)

    def one_row(args):
        q_row, s, b, e = args
        pages = block_tables[s][key_pos // page_size]
        visible = (key_pos >= b) & (key_pos < e)
        bad = jnp.any(visible & ((pages < 0) | (pages >= num_pages)))
        safe = jnp.clip(pages, 0, num_pages - 1)
        # Unread cache rows may hold anything (NaN included): zero them so 0 * NaN cannot leak.
        keep = visible[:, None, None]
        k = jnp.where(keep, k_cache[safe, key_pos % page_size].astype(jnp.float32) * k_mul, 0.0)
        v = jnp.where(keep, v_cache[safe, key_pos % page_size].astype(jnp.float32) * v_mul, 0.0)
        qg = q_row.astype(jnp.float32).reshape(Hkv, Hq // Hkv, D)
        s_ = jnp.einsum("hgd,khd->hgk", qg, k, precision=jax.lax.Precision.HIGHEST) * scale
        if soft_cap is not None:
            cap = jnp.asarray(soft_cap, jnp.float32)
            capped = (cap > 0) & jnp.isfinite(cap)
            cap = jnp.where(capped, cap, 1.0)
            s_ = jnp.where(capped, cap * jnp.tanh(s_ / cap), s_)
        s_ = jnp.where(visible, s_, -jnp.inf)
        m = jnp.max(s_, axis=-1, keepdims=True)
        w = jnp.where(visible, jnp.exp(s_ - jnp.where(jnp.isfinite(m), m, 0.0)), 0.0)
        l = jnp.sum(w, axis=-1)
        o = jnp.einsum("hgk,khd->hgd", w, v, precision=jax.lax.Precision.HIGHEST)
        o = _normalize(o, l, m[..., 0], None if sinks is None else sinks.reshape(Hkv, Hq // Hkv))
        lse = _lse(m[..., 0], l)
        o = jnp.where(bad, jnp.nan, o)
        lse = jnp.where(bad, jnp.nan, lse)
        return o.reshape(Hq, D), lse.reshape(Hq)

    chunk = _rows_per_chunk(2 * capacity * Hkv * D * 4)
    out, lse = jax.lax.map(one_row, (q, seq, begin, end), batch_size=min(chunk, T) or None)
    out = out.astype(q.dtype)
    return (out, lse) if return_lse else out


def _normalize(o, l, m, sinks):
    """Softmax-weighted sums o (weights exp(s - m), summing to l) divided by the denominator: l,
    plus exp(sink - m) per head with sinks. Rows with no key (l = 0) get 0; a NaN read from a key
    the row sees stays NaN."""
    den = l
    if sinks is not None:
        den = l + jnp.exp(jnp.asarray(sinks, jnp.float32) - jnp.where(jnp.isfinite(m), m, 0.0))
    empty = l == 0
    return jnp.where(empty[..., None], 0.0, o / jnp.where(empty, 1.0, den)[..., None])


def _lse(m, l):
    """log(sum exp(s)) from the row max m and l = sum exp(s - m): -inf with no key, NaN stays NaN."""
    empty = l == 0
    return jnp.where(empty, -jnp.inf, m + jnp.log(jnp.where(empty, 1.0, l)))


def _mla_tokens(ckv_cache, kpe_cache, kv_scale, ds_dequant, pages, slots):
    """(latent [..., 512], rope [..., 64]) float32 of the cached MLA tokens at (pages, slots), read
    from any cache format (fp8 parts scaled by kv_scale, default 1.0; 656-byte rows as
    _fp8.unpack_ds_rows(rows, ds_dequant))."""
    def read(part):
        return part.astype(jnp.float32) * ((1.0 if kv_scale is None else kv_scale) if _fp8.is_fp8(part.dtype) else 1.0)
    rows = ckv_cache[pages, slots]
    if ckv_cache.dtype == jnp.uint8:
        return _fp8.unpack_ds_rows(rows, ds_dequant)
    if kpe_cache is None:
        return read(rows[..., :512]), read(rows[..., 512:])
    return read(rows), read(kpe_cache[pages, slots])


def mla_decode(q_nope, q_pe, ckv_cache, kpe_cache, kv_lens, block_tables, *, scale, causal=False, sinks=None,
               kv_scale=None, ds_dequant="float32"):
    """Reference MLA decode. For batch row b with L = clip(kv_lens[b], 0, max_pages*page_size):

    * key j (0 <= j < L) is the cache row at page block_tables[b, j // page_size], slot
      j % page_size: latent c_j (512) and rope r_j (64); kpe_cache=None means ckv_cache is the
      combined [.., 576] layout, latent then rope.
    * score(i, h, j) = scale * (q_nope[b,i,h].c_j + q_pe[b,i,h].r_j); query i sees all j < L, or
      with causal=True only j <= L - s_q + i.
    * out = softmax(scores) @ c (the latent doubles as the value), in q's dtype; lse float32.
      Rows that see no key: out 0, lse -inf. If any of the first ceil(L/page_size) page ids is
      outside [0, num_pages), all of row b's outputs and lse are NaN.
    * sinks [Hq]: as in paged_attention (a denominator term exp(sinks[h]); lse excludes it).
    * Quantized caches are read as float32 first: fp8 parts as value * kv_scale (default 1.0);
      DeepSeek-V3.2's uint8 [.., 656] rows as _fp8.unpack_ds_rows says: value x group scale in
      float32, or with ds_dequant="bfloat16" that product rounded to bfloat16, or with "float16" the
      scale rounded to float16 and then the product (_fp8.unpack_ds_rows).
    """
    B, s_q, H, DL = q_nope.shape
    tokens = functools.partial(_mla_tokens, ckv_cache, kpe_cache, kv_scale, ds_dequant)
    num_pages, page_size, _ = ckv_cache.shape
    max_pages = block_tables.shape[1]
    capacity = max_pages * page_size
    key_pos = jnp.arange(capacity)
    L = jnp.clip(kv_lens, 0, capacity)

    def one_batch(args):
        qn, qp, pages_b, l_b = args
        pages = pages_b[key_pos // page_size]
        present = key_pos < l_b
        bad = jnp.any(present & ((pages < 0) | (pages >= num_pages)))
        safe = jnp.clip(pages, 0, num_pages - 1)
        keep = present[:, None]  # unread rows may hold anything: zero them (0 * NaN would leak)
        latent, rope = tokens(safe, key_pos % page_size)
        c, r = jnp.where(keep, latent, 0.0), jnp.where(keep, rope, 0.0)
        hp = jax.lax.Precision.HIGHEST
        s_ = (jnp.einsum("ihd,kd->ihk", qn.astype(jnp.float32), c, precision=hp)
              + jnp.einsum("ihd,kd->ihk", qp.astype(jnp.float32), r, precision=hp)) * scale
        end = l_b - s_q + 1 + jnp.arange(s_q) if causal else jnp.full((s_q,), l_b)
        visible = key_pos[None, :] < jnp.minimum(end, l_b)[:, None]  # [s_q, capacity]
        visible = visible[:, None, :]
        s_ = jnp.where(visible, s_, -jnp.inf)
        m = jnp.max(s_, axis=-1, keepdims=True)
        w = jnp.where(visible, jnp.exp(s_ - jnp.where(jnp.isfinite(m), m, 0.0)), 0.0)
        l = jnp.sum(w, axis=-1)
        o = jnp.einsum("ihk,kd->ihd", w, c, precision=hp)
        o = _normalize(o, l, m[..., 0], sinks)
        lse = _lse(m[..., 0], l)
        return jnp.where(bad, jnp.nan, o), jnp.where(bad, jnp.nan, lse)

    chunk = _rows_per_chunk(capacity * (DL + 64) * 4 + s_q * H * capacity * 8)
    out, lse = jax.lax.map(one_batch, (q_nope, q_pe, block_tables, L), batch_size=min(chunk, B) or None)
    return out.astype(q_nope.dtype), lse


def mla_decode_sparse(q_nope, q_pe, ckv_cache, kpe_cache, indices, *, scale, topk_lens=None, kv_scale=None,
                      sinks=None, ds_dequant="float32"):
    """Reference sparse (top-k) MLA decode (DeepSeek-V3.2). Query i of batch row b attends the
    cache tokens named by indices[b, i, :n] with n = clip(topk_lens[b], 0, topk) (all topk when
    topk_lens is None): an index is a token slot page * page_size + offset of the cache (whose page
    axis is the token pool: no block table); one that is negative or >= num_pages * page_size is no
    key, and a duplicate counts as often as it appears. Scores, output, lse, sinks and cache
    formats (ds_dequant included) as in mla_decode; a row with no key gets out 0, lse -inf; a NaN in a cache row that
    a row's indices name makes that row NaN (only named rows are read).
    """
    B, s_q, H, _ = q_nope.shape
    num_pages, page_size, _ = ckv_cache.shape
    topk = indices.shape[-1]
    count = jnp.full((B,), topk) if topk_lens is None else jnp.clip(topk_lens, 0, topk)

    def one_batch(args):
        qn, qp, idx, n = args
        keep = (idx >= 0) & (idx < num_pages * page_size) & (jnp.arange(topk) < n)  # [s_q, topk]
        safe = jnp.where(keep, idx, 0)
        latent, rope = _mla_tokens(ckv_cache, kpe_cache, kv_scale, ds_dequant, safe // page_size, safe % page_size)
        c = jnp.where(keep[..., None], latent, 0.0)  # [s_q, topk, 512]; skipped keys read nothing
        r = jnp.where(keep[..., None], rope, 0.0)
        hp = jax.lax.Precision.HIGHEST
        s_ = (jnp.einsum("ihd,ikd->ihk", qn.astype(jnp.float32), c, precision=hp)
              + jnp.einsum("ihd,ikd->ihk", qp.astype(jnp.float32), r, precision=hp)) * scale
        visible = keep[:, None, :]
        s_ = jnp.where(visible, s_, -jnp.inf)
        m = jnp.max(s_, axis=-1, keepdims=True)
        w = jnp.where(visible, jnp.exp(s_ - jnp.where(jnp.isfinite(m), m, 0.0)), 0.0)
        l = jnp.sum(w, axis=-1)
        o = _normalize(jnp.einsum("ihk,ikd->ihd", w, c, precision=hp), l, m[..., 0], sinks)
        lse = _lse(m[..., 0], l)
        return o, lse

    chunk = _rows_per_chunk(s_q * topk * 576 * 4 * 2 + s_q * H * topk * 8)
    out, lse = jax.lax.map(one_batch, (q_nope, q_pe, indices, count), batch_size=min(chunk, B) or None)
    return out.astype(q_nope.dtype), lse


def _write_rows(cache, rows, slot_mapping):
    """cache [P, page_size, ...] with token n's row stored at slot_mapping[n] (page * page_size +
    offset), one token after another; slots outside [0, P * page_size) are skipped."""
    num_pages, page_size = cache.shape[:2]
    flat = cache.reshape((num_pages * page_size,) + cache.shape[2:])

    def one(n, flat):
        slot = slot_mapping[n]
        keep = (slot >= 0) & (slot < num_pages * page_size)
        safe = jnp.where(keep, slot, 0)
        return flat.at[safe].set(jnp.where(keep, rows[n], flat[safe]))
    return jax.lax.fori_loop(0, rows.shape[0], one, flat).reshape(cache.shape)


def write_kv(k_cache, v_cache, k_new, v_new, slot_mapping, *, k_scale=None, v_scale=None, kv_layout="NHD"):
    """Reference cache write: token n's K/V rows go to slot slot_mapping[n] = page * page_size +
    offset (skipped outside [0, P * page_size)); into an fp8 cache as _fp8.quantize(x, scale)
    (x / scale, saturated, round to nearest even; scale default 1.0), else cast."""
    def store(cache, x, scale):
        if _fp8.is_fp8(cache.dtype):
            return _fp8.quantize(x, 1.0 if scale is None else scale, cache.dtype)
        return x.astype(cache.dtype)
    hnd = kv_layout == "HND"
    swap = lambda c: c.transpose(0, 2, 1, 3) if hnd else c  # noqa: E731  (HND <-> NHD)
    k = _write_rows(swap(k_cache), store(k_cache, k_new, k_scale), slot_mapping)
    v = _write_rows(swap(v_cache), store(v_cache, v_new, v_scale), slot_mapping)
    return swap(k), swap(v)


def write_mla_kv(ckv_cache, kpe_cache, ckv_new, kpe_new, slot_mapping, *, kv_scale=None):
    """Reference MLA cache write, as write_kv: split caches get latent and rope separately; a
    combined [.., 576] cache gets their concatenation; a uint8 [.., 656] cache DeepSeek-V3.2's rows
    (_fp8.pack_ds_rows: per-128 scale max|x| / 448, rope bfloat16)."""
    def store(cache, x):
        if _fp8.is_fp8(cache.dtype):
            return _fp8.quantize(x, 1.0 if kv_scale is None else kv_scale, cache.dtype)
        return x.astype(cache.dtype)
    if kpe_cache is not None:
        return (_write_rows(ckv_cache, store(ckv_cache, ckv_new), slot_mapping),
                _write_rows(kpe_cache, kpe_new.astype(kpe_cache.dtype), slot_mapping))
    if ckv_cache.shape[-1] == _fp8.DS_ROW_BYTES:
        return _write_rows(ckv_cache, _fp8.pack_ds_rows(ckv_new, kpe_new), slot_mapping), None
    rows = jnp.concatenate([ckv_new.astype(jnp.float32), kpe_new.astype(jnp.float32)], axis=-1)
    return _write_rows(ckv_cache, store(ckv_cache, rows), slot_mapping), None
