"""fp8_math's checks, shared by tests/test_fp8.py (mla_decode) and tests/test_mla_sparse.py
(mla_decode_sparse): where a kernel computes in fp8 (mla_decode(..., fp8_math=True) on Hopper),
its result against the reference of its rounded queries within a bound derived from the
roundings; where none does, the exact path's bits."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxpaged import _fp8, reference


def queries_as_fp8_math(q_nope, q_pe, rope_fp8=True):
    """The queries as the fp8 mode reads them: each row x 2^k (k puts its largest |value| in (224,
    448]; a zero or non-finite row keeps k = 0) rounded to e4m3 (nearest even), times 2^-k. With
    rope_fp8=False (656-byte rows, whose rope is bf16) the rope stays as it is."""
    q = np.concatenate([np.asarray(q_nope, np.float32), np.asarray(q_pe, np.float32)], axis=-1)
    mx = np.abs(np.where(np.isnan(q), 0, q)).max(axis=-1, keepdims=True)
    ok = (mx > 0) & np.isfinite(mx)
    e = np.frexp(np.where(ok, mx, 1.0))[1] - 1  # floor(log2(mx)) for normal mx
    k = np.minimum(8 - e, 126)
    k = np.where(ok & (np.ldexp(np.where(ok, mx, 1.0), k) > 448), k - 1, k)
    k = np.where(ok, k, 0)
    r = np.ldexp(np.ldexp(q, k).astype(jnp.float8_e4m3fn).astype(np.float32), -k)
    return r[..., :512], (r[..., 512:] if rope_fp8 else np.asarray(q_pe, np.float32))


def fp8_math_bound(q_nope, q_pe, ckv, kv_scale, kv_lens, table, scale, causal, slots=None):
    """Per output element, how far the fp8 mode may be from the reference of its rounded queries
    (float64 numpy over the rounded queries' scores). With p* the probabilities relative to the
    row's largest (p* <= 1), each e4m3 rounding of P moves it by at most 2^-4 p* + 2^-10 (half a
    step: 3 mantissa bits; subnormals below 2^-6, whose step is 2^-9 - the kernel's P is p* x
    2^(smax - m), a factor in [1, 2^8] under its lazy maxima, which only makes that term smaller).
    Hopper's fp8 products sum with about 13 fraction bits aligned to the largest addend of each
    k32 step (tools/wgmma_fp8_probe.cu measured 1.2e-3 of a row's largest |S| over 18 steps): a
    score moves by eps = max(2^-8 max|s|, 2^-10 scale max_t sum_i |q_i k_ti|), which moves each p*
    by a factor within exp(+-2 eps) and lse by eps; a tile's P.V sums (64 addends) by 2^-7 of what
    they add. So |out - ref| <= (2^-4 + 2^-7 + exp(2 eps) - 1) (1 + 2^-4) sum p* |v| / sum p* +
    2^-10 sum |v| / sum p*, plus the output's bf16 rounding (2^-8, the caller's), and |lse -
    ref_lse| <= eps. Returns (that bound per output element, eps per row).
    656-byte rows (ckv uint8; kv_scale unused): P_g = e4m3(p x s[t][g] x 2^-E_g) per latent group g
    of 128 columns, E_g growing to the exponent above the largest scale seen (2^E_g <= 2 max_t
    s[t][g] over the sequence), so the subnormal term is 2^-10 2^E_g sum |e4m3 value| / sum p*
    per column of group g, the rest as above with the values read exactly.
    slots (index lists, s_q = 1): instead of kv_lens and table, batch row b's keys are the cache's
    token slots slots[b] in their order (duplicates counted)."""
    ds = ckv.dtype == jnp.uint8
    if ds:
        lat, rope = _fp8.unpack_ds_rows(ckv)
        latent = np.concatenate([np.asarray(lat, np.float64), np.asarray(rope, np.float64)], axis=-1)
        raw = np.abs(np.asarray(jax.lax.bitcast_convert_type(ckv[..., :512], jnp.float8_e4m3fn), np.float64))
        group_scales = np.abs(np.asarray(jax.lax.bitcast_convert_type(
            ckv[..., 512:528].reshape(ckv.shape[:-1] + (4, 4)), jnp.float32), np.float64))
    else:
        latent = np.asarray(ckv.astype(jnp.float32), np.float64) * kv_scale
    qn, qp = (np.asarray(x, np.float64) for x in (q_nope, q_pe))
    page = latent.shape[1]
    lens, table = (np.asarray(kv_lens), np.asarray(table)) if slots is None else (None, None)
    batch, s_q, heads, _ = qn.shape
    bound, eps_rows = np.zeros(qn.shape), np.zeros(qn.shape[:3])
    assert slots is None or s_q == 1
    for b in range(batch):
        at = np.arange(int(lens[b])) if slots is None else np.asarray(slots[b], np.int64)
        n = len(at)
        if n == 0:
            continue
        rows = (table[b, at // page], at % page) if slots is None else (at // page, at % page)
        keys = latent[rows]  # [n, 576]
        q = np.concatenate([qn[b], qp[b]], axis=-1)  # [s_q, heads, 576]
        s = q @ keys.T * scale  # [s_q, heads, n]
        if causal:
            visible = np.arange(n)[None, :] <= n - s_q + np.arange(s_q)[:, None]
            s = np.where(visible[:, None, :], s, -np.inf)
        smax = s.max(axis=-1, keepdims=True)
        ok = np.isfinite(smax)
        p = np.where(ok, np.exp(s - np.where(ok, smax, 0)), 0)
        den = np.maximum(p.sum(-1, keepdims=True), 1.0)
        sums = np.abs(q) @ np.abs(keys).T * scale  # sum_i |q_i k_ti| x scale
        if causal:
            sums = np.where(visible[:, None, :], sums, 0)
        eps = np.maximum(2.0**-8 * np.abs(np.where(np.isfinite(s), s, 0)).max(-1, keepdims=True),
                         2.0**-10 * sums.max(-1, keepdims=True))
        absv = np.abs(keys[:, :512])
        rel = (2.0**-4 + 2.0**-7 + np.expm1(2 * eps)) * (1 + 2.0**-4) * (p @ absv) / den
        if ds:
            unit = 2 * np.repeat(group_scales[rows].max(axis=0), 128)  # [512]: 2 max_t s[t][g] per column
            sub = 2.0**-10 * np.where(ok, (p > 0).astype(np.float64), 0) @ raw[rows] * unit / den
        else:
            sub = 2.0**-10 * np.where(ok, (p > 0).astype(np.float64), 0) @ absv / den
        bound[b] = rel + sub
        eps_rows[b] = eps[..., 0]
    return bound, eps_rows




def assert_exact_path(out, lse, exact_out, exact_lse):
    """fp8_math is a permission only: where no kernel has the mode, the exact path's bits."""
    np.testing.assert_array_equal(np.asarray(out, np.float32), np.asarray(exact_out, np.float32))
    np.testing.assert_array_equal(np.asarray(lse), np.asarray(exact_lse))


def check_fp8_math(out, lse, exact_out, q_nope, q_pe, ckv, kpe, kw, kv_lens, table, scale, causal, lists=None):
    """Where the fp8 mode ran: its roundings moved the output, and against the reference of its
    rounded queries it stays within fp8_math_bound; rows without keys 0 / -inf, NaN nowhere.
    (Other zeros may differ: a sum of e4m3-grid products can cancel exactly.) lists: a sparse
    call's (indices, topk_lens) in place of kv_lens and table (mla_decode_sparse's reference)."""
    assert not np.array_equal(np.asarray(out, np.float32), np.asarray(exact_out, np.float32))
    ds = ckv.dtype == jnp.uint8  # (656-byte rows: against the exact reading, whatever ds_dequant says)
    qn, qp = queries_as_fp8_math(q_nope, q_pe, rope_fp8=not ds)
    kw = {k: v for k, v in kw.items() if k != "ds_dequant"}
    if lists is None:
        ref_out, ref_lse = reference.mla_decode(jnp.asarray(qn), jnp.asarray(qp), ckv, kpe, kv_lens, table,
                                                scale=scale, causal=causal, **kw)
    else:
        indices, topk_lens = lists
        ref_out, ref_lse = reference.mla_decode_sparse(jnp.asarray(qn), jnp.asarray(qp), ckv, kpe, indices,
                                                       scale=scale, topk_lens=topk_lens, **kw)
    out, ref_out = np.asarray(out, np.float64), np.asarray(ref_out, np.float64)
    assert not np.isnan(out).any()
    assert np.all(out[np.isneginf(np.asarray(ref_lse))] == 0)
    if lists is None:
        bound, eps = fp8_math_bound(qn, qp, ckv, kw.get("kv_scale"), kv_lens, table, scale, causal)
    else:  # (each query row its own list: rows as batch entries of one query each)
        slots = list_slots(indices, topk_lens, ckv.shape[0] * ckv.shape[1])
        flat = lambda x: x.reshape((-1, 1) + x.shape[2:])  # noqa: E731
        bound, eps = fp8_math_bound(flat(qn), flat(qp), ckv, kw.get("kv_scale"), None, None, scale, False,
                                    slots=slots)
        bound, eps = bound.reshape(qn.shape), eps.reshape(qn.shape[:3])
    excess = np.abs(out - ref_out) - (bound + 2.0**-8 * np.abs(ref_out) + 1e-6)
    assert excess.max() <= 0, f"beyond the bound by {excess.max():.3g} at {np.unravel_index(excess.argmax(), excess.shape)}"
    # Not a bound, a check of scale: a faithful numpy emulation of these roundings is 1.6e-2 from
    # the reference here (Frobenius, the first case), a wrong token order in P^T 1.1.
    assert np.linalg.norm(out - ref_out) <= 2.0**-4 * np.linalg.norm(ref_out)
    # lse: the log of the unrounded P's sum, over the fp8 sums' scores of the rounded queries
    lse, ref_lse = np.asarray(lse, np.float64), np.asarray(ref_lse, np.float64)
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(ref_lse))
    fin = np.isfinite(ref_lse)
    assert np.all(np.abs(lse[fin] - ref_lse[fin]) <= (eps + 1e-5 * np.abs(ref_lse) + 1e-4)[fin])


def list_slots(indices, topk_lens, pool):
    """The keys of each query row of a sparse call, [B x s_q] arrays of token slots in list order:
    the first topk_lens[b] (clamped to [0, topk]; all without topk_lens) that lie in [0, pool)."""
    idx = np.asarray(indices, np.int64)
    batch, s_q, topk = idx.shape
    counts = np.full(batch, topk) if topk_lens is None else np.clip(np.asarray(topk_lens), 0, topk)
    out = []
    for b in range(batch):
        for i in range(s_q):
            row = idx[b, i, :counts[b]]
            out.append(row[(row >= 0) & (row < pool)])
    return out
