"""Numerical model of MLA decode over an fp8 (e4m3, per-tensor scale) cache with bf16 queries, for
the design of an fp8-operand kernel (NOTES item 43 e): what each way of feeding the tensor cores
does to the output error against the float64 reference.

    python tools/mla_fp8_split_model.py

Ways modelled (products exact, sums in float32 as the tensor cores' accumulators, unless noted):
  half     today's Hopper kernel: K, V as float16 (exact), bf16 queries as float16 times 2^k per
           row (exact), P rounded to float16.
  fp8q     FlashMLA's dense fp8 decode: queries quantized to e4m3 with one scale, P to e4m3.
  split    queries as hi + lo, two e4m3 terms per value after a per-row power of two puts the
           row's largest in (224, 448]; P (in [0, 1]) times 2^8 the same way: S = Qhi K + Qlo K
           and O = Phi V + Plo V, four fp8 products - the tensor time of the two bf16 ones, over
           1-byte tiles in shared memory and no conversion.
  split14  split with each k = 32 step's partial sum kept to 14 significant bits before it joins
           the accumulator (a pessimistic model of Hopper's fp8 accumulation, after DeepSeek-V3's
           report of ~14 bits retained).
A bf16 value times 2^k is exactly hi + lo when the scaled value is >= 2^-2 (the residual of
rounding 8 significant bits to 4 is a multiple of 2^(e-7), and e4m3's smallest step is 2^-9),
so split is exact down to about 2^-10 of each row's largest and below that off by at most 2^-10
(half e4m3's smallest step), about 2^-18 of the row's largest.
"""
import ml_dtypes
import numpy as np

E4M3 = ml_dtypes.float8_e4m3fn
BF16 = ml_dtypes.bfloat16


def e4m3(x):
    return np.asarray(x, np.float32).astype(E4M3).astype(np.float64)


def pow2_row_scale(x, top=448.0):
    """Per row, the power of two that brings the row's largest |x| into (top / 2, top]."""
    m = np.max(np.abs(x), axis=-1, keepdims=True)
    m = np.where(m > 0, m, 1.0)
    return 2.0 ** np.floor(np.log2(top / m))


def split2(x):
    """x (rows) as hi + lo in e4m3 after a per-row power of two: returns hi, lo, the scale."""
    s = pow2_row_scale(x)
    hi = e4m3(x * s)
    lo = e4m3(x * s - hi)
    return hi, lo, s


def dot_acc(a, b, k_step=None, bits=None):
    """a [M, K] @ b [K, N] with exact products and a float32 accumulator; with bits, each k_step
    slice's partial sum is rounded to that many significant bits before it is accumulated."""
    if bits is None:
        return (a @ b).astype(np.float32).astype(np.float64)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k0 in range(0, a.shape[1], k_step):
        part = a[:, k0:k0 + k_step] @ b[k0:k0 + k_step]
        e = np.floor(np.log2(np.maximum(np.abs(part), 1e-300)))
        q = 2.0 ** (e - (bits - 1))
        acc = (acc + np.round(part / q) * q).astype(np.float32)
    return acc.astype(np.float64)


def attend(q, kv, scale, way, tile=64):
    """One sequence's rows q [H, 576] (bf16 values) over kv [L, 576] (fp8 values, float64),
    online softmax over 64-token tiles as the kernels run it."""
    H = q.shape[0]
    v_all = kv[:, :512]
    m = np.full((H, 1), -np.inf)
    l = np.zeros((H, 1))
    o = np.zeros((H, 512))
    if way == "half":
        qs = pow2_row_scale(q, 2.0 ** 15)
        qa = (q * qs).astype(np.float16).astype(np.float64) / qs  # exact: bf16 in half range
    elif way == "fp8q":
        qd = np.max(np.abs(q)) / 448.0
        qa = e4m3(q / qd) * qd
    else:
        qhi, qlo, qs = split2(q)
    bits = 14 if way == "split14" else None
    for t0 in range(0, kv.shape[0], tile):
        k = kv[t0:t0 + tile]
        v = v_all[t0:t0 + tile]
        if way in ("half", "fp8q"):
            s = dot_acc(qa, k.T)
        else:
            s = (dot_acc(qhi, k.T, 32, bits) + dot_acc(qlo, k.T, 32, bits)) / qs
        s = s * scale
        m_new = np.maximum(m, s.max(axis=1, keepdims=True))
        p = np.exp(s - m_new)
        corr = np.exp(m - m_new)
        l = l * corr + p.sum(axis=1, keepdims=True)
        if way == "half":
            pv = dot_acc(p.astype(np.float16).astype(np.float64), v)
        elif way == "fp8q":
            pv = dot_acc(e4m3(p), v)
        else:
            phi = e4m3(p * 256.0)
            plo = e4m3(p * 256.0 - phi)
            pv = (dot_acc(phi, v, 32, bits) + dot_acc(plo, v, 32, bits)) / 256.0
        o = o * corr + pv
        m = m_new
    return o / l


def main():
    rng = np.random.default_rng(0)
    H, L = 16, 2048
    scale = 1.0 / np.sqrt(192.0)
    print(f"rel err against float64, H={H} L={L} (three seeds' worst)")
    print(f"{'data':34s} " + " ".join(f"{w:>9s}" for w in ("half", "fp8q", "split", "split14")))
    cases = {
        "q N(0,1), cache N(0,1)": (1.0, 1.0, 0.0),
        "q N(0,1)*8, cache N(0,1)": (8.0, 1.0, 0.0),
        "q N(0,1), cache N(0,1)*50 (peaky)": (1.0, 50.0, 0.0),
        "q rows spanning 2^-12..2^4": (1.0, 1.0, 1.0),
    }
    for name, (qmag, kmag, spread) in cases.items():
        errs = {w: 0.0 for w in ("half", "fp8q", "split", "split14")}
        for seed in range(3):
            r = np.random.default_rng(seed)
            q = r.standard_normal((H, 576)) * qmag
            if spread:
                q = q * 2.0 ** r.uniform(-12, 4, (1, 576))
            q = q.astype(BF16).astype(np.float64)
            kv = e4m3(np.clip(r.standard_normal((L, 576)) * kmag / 4.0, -448, 448))
            s = q @ kv.T * scale
            p = np.exp(s - s.max(axis=1, keepdims=True))
            ref = (p @ kv[:, :512]) / p.sum(axis=1, keepdims=True)
            for w in errs:
                out = attend(q, kv, scale, w)
                e = np.linalg.norm(out - ref) / np.linalg.norm(ref)
                errs[w] = e if not e <= errs[w] else errs[w]  # (a NaN shows)
        print(f"{name:34s} " + " ".join(f"{errs[w]:9.1e}" for w in errs))
    # The exactness claim for the split of bf16 values, checked over every bf16 in one scaled range.
    bits = np.arange(0, 2 ** 16, dtype=np.uint32).astype(np.uint16)
    with np.errstate(invalid="ignore"):
        allbf = bits.view(BF16).astype(np.float64)
    allbf = allbf[np.isfinite(allbf) & (np.abs(allbf) >= 0.25) & (np.abs(allbf) < 448)]
    hi = e4m3(allbf)
    lo = e4m3(allbf - hi)
    print(f"bf16 values in [2^-2, 448): {allbf.size}, not exactly hi + lo: {np.sum(hi + lo != allbf)}")


if __name__ == "__main__":
    main()
