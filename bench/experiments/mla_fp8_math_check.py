"""Accuracy of the wide fp8 MLA kernel's fp8-math mode (NOTES item 61; experiment
2026-11-30_mla_fp8_math.patch, on unless JAXPAGED_MLA_FP8_MATH=0) against jaxpaged.reference on the
wide kernel's cases of tests/test_fp8.py: per case the relative error of out (||out - ref|| /
||ref|| over finite entries, float32), the largest |lse - ref_lse| / max(|ref_lse|, 1), and whether the NaN / inf /
zero patterns match the reference's. Run it twice (JAXPAGED_MLA_FP8_MATH=0 and unset) on one build:
the f16 path's numbers are the baseline. Expected of the mode (item 61's model, FlashMLA measured
3.6-4.0e-2 on the bench's inputs): out 2e-2 to 5e-2, patterns equal.

    PYTHONPATH=<build>:tests python3 bench/experiments/mla_fp8_math_check.py
"""
import dataclasses
import functools
import inspect
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
import jaxpaged  # noqa: E402
from jaxpaged import _fp8, reference  # noqa: E402
from cases import mla_case  # noqa: E402

rng = np.random.default_rng(7)
mode = "f16" if os.environ.get("JAXPAGED_MLA_FP8_MATH") == "0" else "fp8math"
# (with the API patch, 2026-11-30_mla_fp8_math_api.patch, the mode is mla_decode's fp8_math option)
API = {"fp8_math": mode == "fp8math"} if "fp8_math" in inspect.signature(jaxpaged.mla_decode).parameters else {}


def caches(case, fmt):
    dtype = jnp.float8_e5m2 if fmt == "e5m2" else jnp.float8_e4m3fn
    return _fp8.quantize(case.ckv_cache, 0.01, dtype)


def report(name, out, lse, ref_out, ref_lse):
    out = np.asarray(jnp.asarray(out, jnp.float32))
    ref = np.asarray(jnp.asarray(ref_out, jnp.float32))
    lse, ref_lse = np.asarray(lse), np.asarray(ref_lse)
    same = (np.array_equal(np.isnan(out), np.isnan(ref)) and np.array_equal(np.isinf(out), np.isinf(ref))
            and np.array_equal(out == 0, ref == 0) and np.array_equal(np.isneginf(lse), np.isneginf(ref_lse)))
    fin = np.isfinite(ref) & np.isfinite(out)
    rel = np.linalg.norm(out[fin] - ref[fin]) / max(np.linalg.norm(ref[fin]), 1e-30)
    lf = np.isfinite(ref_lse) & np.isfinite(lse)
    dl = (np.abs(lse[lf] - ref_lse[lf]) / np.maximum(np.abs(ref_lse[lf]), 1.0)).max(initial=0.0)
    print(f"{mode:8s} {name:44s} out rel err {rel:.2e}  lse rel err {dl:.2e}  patterns {'same' if same else 'DIFFER'}",
          flush=True)


CASES = [  # heads, s_q, page_size, causal, kv_lens, query factor (the wide kernel: > 16 query rows, pages >= 64)
    (128, 1, 64, False, [0, 1000, 4100, 63, 129], 1.0),
    (32, 1, 128, False, [3, 64, 2000], 1.0),
    (64, 2, 64, True, [1, 700, 65], 1.0),
    (128, 1, 64, False, [4096] * 4, 1.0),
    (128, 2, 64, True, [4096, 3000], 1.0),
    # Long sequences, and nearly flat attention (queries x 0.02): O summed over many tiles, where
    # Hopper's fp8 products keep fewer bits than float32 (tools/wgmma_fp8_probe.cu).
    (128, 1, 64, False, [16384, 32768], 1.0),
    (128, 1, 64, False, [16384, 32768], 0.02),
]
for heads, s_q, page, causal, lens, qf in CASES:
    case = mla_case(rng, kv_lens=lens, s_q=s_q, num_heads=heads, page_size=page, dtype="bfloat16", combined=True)
    if qf != 1.0:
        case = dataclasses.replace(case, q_nope=(case.q_nope * qf).astype(case.q_nope.dtype),
                             q_pe=(case.q_pe * qf).astype(case.q_pe.dtype))
    for fmt in ("e4m3", "e5m2"):
        ckv = caches(case, fmt)
        args = (case.q_nope, case.q_pe, ckv, None, case.kv_lens, case.block_tables)
        out, lse = jax.jit(functools.partial(jaxpaged.mla_decode, **API, scale=0.07, causal=causal, kv_scale=0.01))(*args)
        ref_out, ref_lse = reference.mla_decode(*args, scale=0.07, causal=causal, kv_scale=0.01)
        lens_s = str(lens) if len(lens) < 5 or len(set(lens)) > 1 else f"[{lens[0]}] x {len(lens)}"
        report(f"{fmt} h{heads} sq{s_q} p{page} {'causal ' if causal else ''}{lens_s}{' q x%g' % qf if qf != 1 else ''}",
               out, lse, ref_out, ref_lse)

# A causal token that sees no key beside NaN keys (test_mla_row_without_keys_is_zero_beside_nan_values, 32 heads).
case = mla_case(rng, kv_lens=[1, 2], s_q=3, num_heads=32, page_size=64, dtype="bfloat16", combined=True)
table = np.asarray(case.block_tables)
ckv = caches(case, "e4m3")
raw = np.asarray(jax.lax.bitcast_convert_type(ckv, jnp.uint8)).copy()
raw[table[:, 0], 0, :512] = 0x7F
ckv = jax.lax.bitcast_convert_type(jnp.asarray(raw), ckv.dtype)
args = (case.q_nope, case.q_pe, ckv, None, case.kv_lens, case.block_tables)
out, lse = jax.jit(functools.partial(jaxpaged.mla_decode, **API, scale=0.07, causal=True, kv_scale=0.01))(*args)
report("no key beside NaN keys (h32)", out, lse, *reference.mla_decode(*args, scale=0.07, causal=True, kv_scale=0.01))

# Queries of any magnitude (test_mla_fp8_queries_of_any_magnitude, 128 heads, pages of 64).
case = mla_case(rng, kv_lens=[300, 77], s_q=1, num_heads=128, page_size=64, dtype="bfloat16", combined=True)
ckv = caches(case, "e4m3")
factors = np.array([2.0**20, 2.0**-20, 0.0, 1.0] * 32, np.float32)
spread = np.exp2(np.linspace(-40.0, 15.0, 576)).astype(np.float32)
sn = np.broadcast_to(factors[None, None, :, None], (1, 1, 128, 512)).copy()
sp = np.broadcast_to(factors[None, None, :, None], (1, 1, 128, 64)).copy()
sn[:, :, 5], sp[:, :, 5] = spread[:512], spread[512:]
q_nope = (case.q_nope.astype(jnp.float32) * sn).astype(jnp.bfloat16)
q_pe = (case.q_pe.astype(jnp.float32) * sp).astype(jnp.bfloat16)
args = (q_nope, q_pe, ckv, None, case.kv_lens, case.block_tables)
out, lse = jax.jit(functools.partial(jaxpaged.mla_decode, **API, scale=0.07, kv_scale=0.01))(*args)
report("queries of any magnitude (h128)", out, lse, *reference.mla_decode(*args, scale=0.07, kv_scale=0.01))
# An infinite query value: its row's output is NaN in the reference (inf x key values of both signs).
q_inf = case.q_nope.at[0, 0, 3, 7].set(jnp.inf)
args = (q_inf, case.q_pe, ckv, None, case.kv_lens, case.block_tables)
out, lse = jax.jit(functools.partial(jaxpaged.mla_decode, **API, scale=0.07, kv_scale=0.01))(*args)
report("an infinite query value (h128)", out, lse, *reference.mla_decode(*args, scale=0.07, kv_scale=0.01))
