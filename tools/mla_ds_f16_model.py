"""A numpy model of NOTES item 48 h: DeepSeek-V3.2's 656-byte MLA rows read on f16 tensor cores with
the group scales applied in registers (one f16 multiply per value) and powers of two keeping the
operands in f16's range. Checks the arithmetic of the design, not a kernel.

For one sequence and a few query rows it computes, in float64 unless said otherwise:
  exact   - the reference's float32 reading (value x scale), softmax, output;
  bf16    - the reference's ds_dequant="bfloat16" reading (value x scale rounded to bfloat16);
  model   - the design:
            Q' = f16(q x 2^k) per row (the wide kernel's query scaling), its rope in bf16 x 2^k;
            K: per tile T, E_T puts the tile's largest value x scale near 2^14;
            K' = f16(v x f16(s x 2^E_T)) (an e4m3 value is an f16 exactly; the scale x 2^E_T
            rounded to f16 once per token and group, as the kernel would hold it), the rope's
            bf16 values x 2^E_T (exact);
            S = sum K' Q' in float32 (products exact, float32 sums), x 2^-(k + E_T) x scale;
            lazy row maxima as the kernel's (a rescale only past 2^8; float32 sums);
            V: V' = f16(v x f16(s x 2^E_V)) with E_V per sequence (v_mode "block": lowered when
            a tile's values would pass 2^12, O rescaled; "both": also raised when they sit 2^8
            below) or per tile moved into P (v_mode "p": P' = f16(P x 2^-E_T)); O = sum P V'
            (float32); out = O x 2^-E_V / l.
It prints each reading's worst error against `exact`, relative to the row's largest |output|
(the tests' scale), on data like the bench's and on adversarial scales (groups of very different
magnitude in one token, tiles of very different magnitude, tiny and huge caches, tiny tiles that
lead the attention).

    python3 tools/mla_ds_f16_model.py
"""

import numpy as np
import ml_dtypes

F16 = np.float16
BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn


def quantize_rows(latent):
    """latent [T, 512] float -> (values e4m3 [T, 512] as float64, scales [T, 4] float32)."""
    g = latent.reshape(-1, 4, 128).astype(np.float32)
    amax = np.abs(g).max(-1, keepdims=True)
    scales = np.where(amax > 0, amax / np.float32(448.0), np.float32(1.0)).astype(np.float32)
    values = np.clip(g / scales, -448, 448).astype(E4M3).astype(np.float64)
    return values.reshape(-1, 512), scales[..., 0]


def softmax_out(s, v):
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    return (p @ v) / p.sum(-1, keepdims=True)


def readings(q_nope, q_pe, values, scales, rope, scale):
    """exact and bf16 readings' outputs [rows, 512]."""
    lat = (values.reshape(-1, 4, 128) * scales[..., None].astype(np.float64)).reshape(-1, 512)
    lat32 = lat.astype(np.float32).astype(np.float64)
    lat_bf = lat32.astype(BF16).astype(np.float64)
    out = []
    for l in (lat32, lat_bf):
        s = (q_nope @ l.T + q_pe @ rope.T) * scale
        out.append(softmax_out(s, l))
    return out


def model(q_nope, q_pe, values, scales, rope, scale, v_mode="block"):
    """v_mode "block": V' = f16(v x s x 2^eb) with one power of two for the sequence, lowered
    lazily (O rescaled) when a tile's values would pass f16's range; "both": also raised when a
    tile's values sit more than 2^8 below it (rare in real caches); "p": a power of two per tile
    moved into P (P' = f16(P x 2^-e_T)), NOTES 48 h's first form - P's own range then falls into
    f16's subnormals."""
    T = values.shape[0]
    rows = q_nope.shape[0]
    # Queries: f16 x 2^k per row (largest finite |q| into [2^14, 2^15)), the rope in bf16 x 2^k.
    qcat = np.concatenate([q_nope, q_pe], -1)
    k = np.array([14 - int(np.floor(np.log2(np.abs(r).max()))) for r in qcat])
    qn = (q_nope * 2.0 ** k[:, None]).astype(F16).astype(np.float64)
    qp = (q_pe * 2.0 ** k[:, None]).astype(BF16).astype(np.float64)
    m = np.full(rows, -np.inf)
    l = np.zeros(rows, np.float32)
    o = np.zeros((rows, 512), np.float32)
    eb = None  # V's power of two for the block (lowered lazily; O then rescaled)
    for t0 in range(0, T, 64):
        sl = slice(t0, min(t0 + 64, T))
        v, s_, r = values[sl], scales[sl].astype(np.float64), rope[sl]
        # K: a power of two per tile, the largest value x scale near 2^14 (S's rows are tokens).
        ek = int(np.clip(np.floor(np.log2(2.0 ** 14 / (448 * s_.max()))), -126, 126))
        k16 = (s_ * 2.0 ** ek).astype(F16).astype(np.float64)
        kp = (v.reshape(-1, 4, 128) * k16[..., None]).astype(F16).astype(np.float64).reshape(-1, 512)
        rp = r * 2.0 ** ek  # (the rope's bf16 fragments x 2^ek: exact, one HMUL2 per two values)
        raw = (qn @ kp.T).astype(np.float32).astype(np.float64) + (qp @ rp.T).astype(np.float32).astype(np.float64)
        sc = raw * (2.0 ** (-k - ek))[:, None] * scale * np.log2(np.e)  # log2 domain
        tile_max = sc.max(-1)
        need = tile_max > m + 8
        if need.any():
            m_new = np.where(need, np.maximum(m, tile_max), m)
            corr = np.where(np.isfinite(m), np.exp2(m - m_new), 0.0).astype(np.float32)
            l *= corr
            o *= corr[:, None]
            m = m_new
        p = np.exp2(sc - m[:, None])
        l += p.sum(-1).astype(np.float32)
        # V: value x scale x 2^e, the largest near 2^12 (P <= 2^8 keeps P V' in f16's range).
        want = int(np.floor(np.log2(2.0 ** 12 / (448 * s_.max()))))
        if v_mode == "p":
            ev = want
        else:
            if eb is None:
                eb = want
            elif want < eb or (v_mode == "both" and want > eb + 8):
                # this tile's values would pass f16's range (lower eb), or ("both") sit 2^8 below
                # the block's (raise eb, so they keep their bits): O rescaled either way
                o *= np.float32(2.0 ** (want - eb))
                eb = want
            ev = eb
        v16 = (s_ * 2.0 ** ev).astype(F16).astype(np.float64)
        vp = (v.reshape(-1, 4, 128) * v16[..., None]).astype(F16).astype(np.float64).reshape(-1, 512)
        pp = (p * 2.0 ** -ev).astype(F16).astype(np.float64) if v_mode == "p" else p.astype(F16).astype(np.float64)
        o += (pp @ vp).astype(np.float32)
    if v_mode in ("block", "both"):
        o = o * np.float32(2.0 ** -eb)
    return o / l[:, None]


def case(rng, tokens, rows, kind):
    lat = rng.standard_normal((tokens, 512))
    if kind == "groups apart":  # one token's four groups 2^0, 2^-6, 2^-12, 2^4 apart
        lat *= np.repeat(2.0 ** np.array([0, -6, -12, 4]), 128)[None, :]
    elif kind == "tiles apart":  # tiles of 1e-3 .. 1e3
        lat *= (10.0 ** rng.uniform(-3, 3, tokens // 64 + 1)).repeat(64)[:tokens, None]
    elif kind == "tiny cache":
        lat *= 1e-5
    elif kind == "large cache":
        lat *= 1e4
    elif kind.startswith("tiny tiles lead"):  # the first tile's latent 1e3, the rest 10^-x, whose
        lat[:64] *= 1e3                         # rope scores lead (their outputs dominate)
        lat[64:] *= 10.0 ** -int(kind.split("-")[-1].rstrip(")"))
    rope = rng.standard_normal((tokens, 64)).astype(BF16).astype(np.float64)
    q_nope = rng.standard_normal((rows, 512)).astype(BF16).astype(np.float64)
    q_pe = rng.standard_normal((rows, 64)).astype(BF16).astype(np.float64)
    values, scales = quantize_rows(lat)
    scale = 1 / np.sqrt(192.0) / max(1.0, np.abs(lat).max() / 4)  # keep the softmax non-trivial
    if kind.startswith("tiny tiles lead"):  # row 0's rope scores ~ +20 on the tiny tiles
        rope[64:] = (q_pe[0] * 20 / (scale * (q_pe[0] @ q_pe[0]))).astype(BF16).astype(np.float64)
    return q_nope, q_pe, values, scales, rope, scale


def main():
    rng = np.random.default_rng(0)
    print(f"{'data':24s} {'bf16 reading':>13s} {'f16 2^e down':>13s} {'f16 2^e both':>13s} {'f16 2^e in P':>13s}")
    for kind in ("bench-like", "groups apart", "tiles apart", "tiny cache", "large cache",
                 "tiny tiles lead (1e-3)", "tiny tiles lead (1e-6)", "tiny tiles lead (1e-9)"):
        args = case(rng, 1000, 16, kind)
        exact, bf = readings(*args)
        den = np.abs(exact).max(-1)
        err = lambda out: (np.abs(out - exact).max(-1) / den).max()  # noqa: E731
        print(f"{kind:24s} {err(bf):13.2e} {err(model(*args)):13.2e} {err(model(*args, v_mode='both')):13.2e}"
              f" {err(model(*args, v_mode='p')):13.2e}")
    print("(max over rows of max |out - exact| / max |exact|; exact = the float32 reading)")


if __name__ == "__main__":
    main()
