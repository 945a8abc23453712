"""The test's checks (tests/test_fp8.py::test_mla_fp8_math after 2026-11-30_mla_fp8_math_api.patch)
applied to kernel_emu.py's emulation of the kF8 wide kernel (lazy maxima, P rounded against the
running maximum, per-tile float32 promotion, bf16 output) with accmodel.py's Hopper fp8 sums
(13 fraction bits after alignment per k32 step, calibrated on tools/wgmma_fp8_probe.cu's numbers);
kernel_emu.py and accmodel.py were written by session 39's review helper. Every check should pass
with margin (session 39: element ratio <= 0.23, lse ratio <= 0.30, Frobenius <= 0.017 of 0.0625).

    PYTHONPATH=<cpu build> python3 bench/experiments/fp8math_emulation/run_emu.py <tree>/tests [seeds]
"""
import sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, __file__.rsplit("/", 1)[0])
import numpy as np, jax.numpy as jnp
import importlib, test_fp8 as T
import kernel_emu as K
from cases import mla_case
from jaxpaged import reference
cases = [(128, 1, 64, False, [0, 1000, 4100, 63, 129], 0.07), (64, 2, 64, True, [1, 700, 65], 0.07),
         (128, 1, 64, False, [2000, 700], 0.5)]
for ci, (heads, s_q, page, causal, lens, scale) in enumerate(cases):
    for fmt in ("fp8 combined", "fp8 combined e5m2"):
        for seed in range(int(sys.argv[2]) if len(sys.argv) > 2 else 2):
            rng = np.random.default_rng(seed)
            case = mla_case(rng, kv_lens=lens, s_q=s_q, num_heads=heads, page_size=page, dtype="bfloat16", combined=True)
            ckv, kpe, kw = T._mla_caches(case, fmt)
            out, lse = K.emulate(case, ckv, kw, s_q, heads, causal, scale)
            qn, qp = T._queries_as_fp8_math(case.q_nope, case.q_pe)
            ref_out, ref_lse = reference.mla_decode(jnp.asarray(qn), jnp.asarray(qp), ckv, kpe, case.kv_lens,
                                                    case.block_tables, scale=scale, causal=causal, **kw)
            ref_out = np.asarray(ref_out, np.float64)
            zeros_ok = bool(np.all(out[np.isneginf(np.asarray(ref_lse))] == 0))
            bound, eps = T._fp8_math_bound(qn, qp, ckv, kw["kv_scale"], case.kv_lens, case.block_tables, scale, causal)
            ratio = (np.abs(out - ref_out) / (bound + 2.0**-8 * np.abs(ref_out) + 1e-6)).max()
            fro = np.linalg.norm(out - ref_out) / np.linalg.norm(ref_out)
            lse_, ref_lse_ = np.asarray(lse, np.float64), np.asarray(ref_lse, np.float64)
            fin = np.isfinite(ref_lse_)
            lr = (np.abs(lse_ - ref_lse_)[fin] / (eps + 1e-5 * np.abs(ref_lse_) + 1e-4)[fin]).max()
            ninf = np.array_equal(np.isneginf(lse_), np.isneginf(ref_lse_))
            print(ci, fmt[-4:], seed, f"zeros {zeros_ok} elem ratio {ratio:.3f} fro {fro:.4f} (limit 0.0625) lse ratio {lr:.3f} ninf {ninf}", flush=True)
