"""Outputs of the wide MLA kernel (sm90/fp8_wide.cuh) saved, or compared bit for bit with a saved run:
for variants that must not change any result (e.g. 2026-12-08_wide_epilogue_compact.patch: the same
sums, factors and products, stored from other code), every output and lse must equal the base
build's. Every wide mode: per-tensor fp8 read exactly and with fp8_math (kF8), 656-byte rows read as
bfloat16 / float16 and with fp8_math (kDF), dense and over sparse lists; whole and cut sequences,
16 and 128 heads, s_q 2 causal, empty sequences and lists.

    PYTHONPATH=/tmp/ab_base python3 -P bench/experiments/wide_bitwise.py save /tmp/base.npz
    PYTHONPATH=/tmp/ab_new python3 -P bench/experiments/wide_bitwise.py compare /tmp/base.npz
"""

from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np


def outputs():
    import jax
    import jax.numpy as jnp

    import jaxpaged
    from jaxpaged import _fp8

    rng = np.random.default_rng(59)
    page, pages = 64, 1024
    rows = (rng.standard_normal((pages, page, 576)) * 0.5).astype(np.float32)
    scaled = rows * np.exp2(rng.integers(-6, 7, (pages, page, 1))).astype(np.float32)  # (656: scales vary by token)
    bf16 = jnp.asarray(scaled, jnp.bfloat16)
    caches = {
        "fp8": (_fp8.quantize(jnp.asarray(rows), 0.01, jnp.float8_e4m3fn), dict(kv_scale=0.01)),
        "656": (_fp8.pack_ds_rows(bf16[..., :512], bf16[..., 512:]), {}),
    }
    readings = {"fp8": [{}, dict(fp8_math=True)],
                "656": [dict(ds_dequant="bfloat16"), dict(ds_dequant="float16"), dict(fp8_math=True)]}
    res = {}
    kv_lens = np.array([4100, 63, 1, 2000, 700, 0, 129, 3000, 4096, 64], np.int32)
    table = rng.permutation(pages)[: len(kv_lens) * 65].reshape(len(kv_lens), 65).astype(np.int32)
    for heads, s_q, causal in [(128, 1, False), (16, 1, False), (64, 2, True)]:
        qn = jnp.asarray(rng.standard_normal((len(kv_lens), s_q, heads, 512)), jnp.bfloat16)
        qp = jnp.asarray(rng.standard_normal((len(kv_lens), s_q, heads, 64)), jnp.bfloat16)
        for fmt, (ckv, kw) in caches.items():
            for opts in readings[fmt]:
                f = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, causal=causal, **kw, **opts))
                out, lse = f(qn, qp, ckv, None, jnp.asarray(kv_lens), jnp.asarray(table))
                name = f"dense h{heads} sq{s_q} {fmt} {sorted(opts.items())}"
                res[name + " out"] = np.asarray(out.astype(jnp.float32))
                res[name + " lse"] = np.asarray(lse)
    ckv = caches["656"][0]
    for heads, batch, s_q, topk in [(128, 64, 1, 2048), (16, 32, 2, 512), (64, 8, 1, 128)]:
        qn = jnp.asarray(rng.standard_normal((batch, s_q, heads, 512)), jnp.bfloat16)
        qp = jnp.asarray(rng.standard_normal((batch, s_q, heads, 64)), jnp.bfloat16)
        idx = rng.integers(-64, pages * page, (batch, s_q, topk)).astype(np.int32)  # (negative: no key)
        lens = jnp.asarray((97 * np.arange(batch)) % (topk + 1), jnp.int32)  # (0 .. topk: empty lists too)
        for opts in readings["656"]:
            f = jax.jit(functools.partial(jaxpaged.mla_decode_sparse, scale=0.07, topk_lens=lens, **opts))
            out, lse = f(qn, qp, ckv, None, jnp.asarray(idx))
            name = f"sparse h{heads} b{batch} sq{s_q} top{topk} {sorted(opts.items())}"
            res[name + " out"] = np.asarray(out.astype(jnp.float32))
            res[name + " lse"] = np.asarray(lse)
    return res


def main():
    """The save / compare of narrow_bitwise.py (each array's 32-bit words: -0 and NaN payloads
    count) over this file's outputs."""
    spec = importlib.util.spec_from_file_location("narrow_bitwise", os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "narrow_bitwise.py"))
    narrow = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(narrow)
    narrow.main(outputs)


if __name__ == "__main__":
    main()
