"""A numpy emulation of the fp8-math mode's roundings (queries rounded as the kernel rounds them,
P rounded to e4m3 relative to the row's largest) checked against tests/test_fp8.py's
_fp8_math_bound, and the same with P^T's token order wrong (the test must fail it). Needs the
tests of 2026-11-30_mla_fp8_math_api.patch (run from a tree with it applied):

    PYTHONPATH=<cpu build> python3 bench/experiments/fp8_math_bound_emulation.py <tree>/tests
"""
import sys
sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "tests")

import numpy as np, jax, jax.numpy as jnp
import test_fp8 as T
from cases import mla_case
from jaxpaged import reference
rng = np.random.default_rng(0)
for heads, s_q, page, causal, lens in [(128,1,64,False,[0,1000,4100,63,129]), (64,2,64,True,[1,700,65])]:
    case = mla_case(rng, kv_lens=lens, s_q=s_q, num_heads=heads, page_size=page, dtype="bfloat16", combined=True)
    ckv, kpe, kw = T._mla_caches(case, "fp8 combined")
    qn, qp = T._queries_as_fp8_math(case.q_nope, case.q_pe)
    ref_out, _ = reference.mla_decode(jnp.asarray(qn), jnp.asarray(qp), ckv, kpe, case.kv_lens, case.block_tables, scale=0.07, causal=causal, **kw)
    ref_out = np.asarray(ref_out, np.float64)
    bound, eps = T._fp8_math_bound(qn, qp, ckv, kw["kv_scale"], case.kv_lens, case.block_tables, 0.07, causal)
    # emulate: P rounded to e4m3 relative to the row max
    latent = np.asarray(ckv.astype(jnp.float32), np.float64) * kw["kv_scale"]
    emu = np.zeros_like(ref_out); bug = np.zeros_like(ref_out)
    for b, n in enumerate(lens):
        if n == 0: continue
        tb = np.asarray(case.block_tables)[b]
        keys = latent[tb[np.arange(n)//page], np.arange(n)%page]
        q = np.concatenate([qn[b], qp[b]], -1).astype(np.float64)
        sc = q @ keys.T * 0.07
        if causal:
            vis = np.arange(n)[None,:] <= n - s_q + np.arange(s_q)[:,None]
            sc = np.where(vis[:,None,:], sc, -np.inf)
        m = sc.max(-1, keepdims=True); m = np.where(np.isfinite(m), m, 0.0); p = np.exp(sc - m)
        pr = p.astype(np.float32).astype(jnp.float8_e4m3fn).astype(np.float64)
        emu[b] = (pr @ keys[:, :512]) / np.maximum(p.sum(-1, keepdims=True), 1e-300)
        perm = np.arange(n); perm[: (n//16)*16] = perm[: (n//16)*16].reshape(-1,16)[:, [0,8,1,9,2,10,3,11,4,12,5,13,6,14,7,15]].reshape(-1)
        bug[b] = (pr[..., perm] @ keys[:, :512]) / np.maximum(p.sum(-1, keepdims=True), 1e-300)
    for name, out in (("emulated", emu), ("token-order bug", bug)):
        out = out.astype(np.float32).astype(jnp.bfloat16).astype(np.float64)
        excess = np.abs(out - ref_out) - (bound + 2.0**-8*np.abs(ref_out) + 1e-6)
        fro = np.linalg.norm(out - ref_out) / np.linalg.norm(ref_out)
        print(heads, lens, name, "max excess %.3g" % excess.max(), "frac over %.4f" % (excess > 0).mean(), "fro rel %.3g" % fro,
              "bound/|ref| median %.3g" % np.median(bound/np.maximum(np.abs(ref_out),1e-9)))
