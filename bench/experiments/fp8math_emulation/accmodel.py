"""A model of Hopper fp8 wgmma sums (session 39 review helper): per k32 step the accumulator and
the products aligned to their largest exponent and truncated to F fraction bits; F = 13 reproduces
tools/wgmma_fp8_probe.cu's measured errors (2.3e-4 / 1.1e-3 against 2.3e-4 / 1.19e-3)."""
import numpy as np, ml_dtypes
E4 = ml_dtypes.float8_e4m3fn
def trunc_to(x, q):  # truncate toward zero to a multiple of q (q broadcast)
    return np.trunc(x / q) * q
def fp8_dot(Q, K, F=13, promote=18, group=32, trunc_out=False):
    """Q [R, 576], K [N, 576] exact fp8-valued float64. Hopper-like: per k32 step, the accumulator
    and the products aligned to the max exponent among them, each truncated to F fraction bits."""
    R, D = Q.shape; N = K.shape[0]
    out = np.zeros((R, N)); acc = np.zeros((R, N))
    for step in range(D // 32):
        sl = slice(32 * step, 32 * step + 32)
        prods = Q[:, None, sl] * K[None, :, sl]  # [R, N, 32]
        for g0 in range(0, 32, group):
            pg = prods[..., g0:g0 + group]
            terms = np.concatenate([acc[..., None], pg], -1)
            mx = np.abs(terms).max(-1)
            e = np.floor(np.log2(np.where(mx > 0, mx, 1.0)))
            qstep = np.exp2(e - F)[..., None]
            acc = trunc_to(terms, qstep).sum(-1)
            if trunc_out:
                m, ex = np.frexp(acc); acc = np.ldexp(np.trunc(m * 2.0**14) / 2.0**14, ex)
        if (step + 1) % promote == 0:
            out += acc.astype(np.float32); acc = np.zeros((R, N))
    return out + acc
