"""Outputs of the wide MLA kernel (sm90/fp8_wide.cuh) saved, or compared bit for bit with a saved run:
for variants that must not change any result (e.g. 2026-12-08_wide_epilogue_compact.patch: the same
sums, factors and products, stored from other code), every output and lse must equal the base
build's. Every wide mode: per-tensor fp8 read exactly and with fp8_math (kF8), 656-byte rows read as
bfloat16 / float16 and with fp8_math (kDF), dense and over sparse lists; whole and cut sequences,
16 and 128 heads, s_q 2 causal, empty sequences and lists. Then the fp8_math modes (kF8, kDF dense
and sparse: the queries rounded to e4m3 in the kernel) on queries of special values, a pattern a
row (special_queries): +-inf and NaN of either sign (in the latent or the rope), +-0 rows, bf16
subnormals only, tiny and huge rows, a huge value over tiny ones, e4m3 rounding ties, the largest
|value| at the exponent rule's edges; 48 heads, so that a 64-row block holds rows past the sequence.

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
    # The fp8_math modes on special queries (their own generator: the cases above keep their inputs).
    srng = np.random.default_rng(60)
    f8 = [("fp8", dict(fp8_math=True)), ("656", dict(fp8_math=True))]
    for heads, s_q, causal in [(48, 1, False), (128, 2, True)]:
        qn, qp = special_queries(srng, (len(kv_lens), s_q, heads))
        for fmt, opts in f8:
            ckv, kw = caches[fmt]
            f = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, causal=causal, **kw, **opts))
            out, lse = f(qn, qp, ckv, None, jnp.asarray(kv_lens), jnp.asarray(table))
            name = f"special dense h{heads} sq{s_q} {fmt} {sorted(opts.items())}"
            res[name + " out"] = np.asarray(out.astype(jnp.float32))
            res[name + " lse"] = np.asarray(lse)
    for heads, batch, s_q, topk in [(48, 16, 1, 512), (128, 8, 2, 256)]:
        qn, qp = special_queries(srng, (batch, s_q, heads))
        idx = srng.integers(-64, pages * page, (batch, s_q, topk)).astype(np.int32)
        lens = jnp.asarray((97 * np.arange(batch)) % (topk + 1), jnp.int32)
        f = jax.jit(functools.partial(jaxpaged.mla_decode_sparse, scale=0.07, topk_lens=lens, fp8_math=True))
        out, lse = f(qn, qp, ckv, None, jnp.asarray(idx))
        name = f"special sparse h{heads} b{batch} sq{s_q} top{topk} [('fp8_math', True)]"
        res[name + " out"] = np.asarray(out.astype(jnp.float32))
        res[name + " lse"] = np.asarray(lse)
    return res


def special_queries(rng, lead):
    """bf16 q_nope [*lead, 512] and q_pe [*lead, 64], each query row (b, i, h) one of the patterns
    below in turn (row index mod their number), built as bf16 bit patterns."""
    import jax.numpy as jnp
    import ml_dtypes

    def bits(x):  # float32 -> bf16 bit patterns (round to nearest even)
        return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)

    def normal(n):
        return bits(rng.standard_normal(n))

    def at(row, where, value, lo=0):  # value's bits at `where` random positions lo .. 575 of the row
        row[lo + rng.choice(576 - lo, where, replace=False)] = value
        return row

    # e4m3 rounding ties: (1 + (2m + 1) / 16) 2^e lies halfway between two e4m3 values for the row's
    # k = 0 (448 the row's largest); below 2^-6 halfway points of the subnormal steps (2^-9 (j + 1/2))
    ties = np.concatenate([(1 + (2 * np.arange(8) + 1) / 16)[None, :] * np.exp2(np.arange(-6, 8))[:, None],
                           (np.arange(64) + 0.5)[None, :] * np.exp2(-9.0)], axis=None)
    patterns = [
        lambda: normal(576),
        lambda: at(normal(576), 1, 0x7F80),  # +inf in the row
        lambda: at(normal(576), 2, 0xFF80),  # -inf
        lambda: at(normal(576), 3, 0x7FC0),  # NaN
        lambda: at(normal(576), 3, 0xFFC1),  # NaN, sign set, another payload
        lambda: at(at(normal(576), 1, 0x7F80), 2, 0xFFC0),  # inf and NaN
        lambda: at(normal(576), 1, 0x7F80, lo=512),  # +inf in the rope only
        lambda: np.concatenate([normal(512), np.full(64, 0xFF80, np.uint16)]),  # the rope all -inf
        lambda: np.where(rng.random(576) < 0.5, 0x8000, 0).astype(np.uint16),  # +-0
        lambda: np.full(576, 0x8000, np.uint16),  # -0 only
        lambda: np.full(576, 0x7FC0, np.uint16) | (rng.random(576) < 0.5).astype(np.uint16) << 15,  # NaN only
        lambda: (rng.integers(1, 0x80, 576) | (rng.random(576) < 0.5) << 15).astype(np.uint16),  # subnormals only
        lambda: bits(rng.standard_normal(576) * 1e-38),  # tiny (normals and subnormals)
        lambda: at(bits(rng.standard_normal(576) * 1e37), 2, 0x7F7F),  # huge, bf16's largest
        lambda: at(bits(rng.standard_normal(576) * 1e-12), 1, bits(-3e30)),  # a huge value over tiny ones
        lambda: at(bits(rng.choice(ties, 576) * np.where(rng.random(576) < 0.5, -1, 1)), 1, bits(448.0)),  # ties
        lambda: at(bits(rng.choice(ties, 576) * 2.0 ** -20), 1, bits(448.0 * 2.0 ** -20)),  # ties, scaled
        lambda: at(bits(rng.standard_normal(576)), 1, bits(1.75 * 2.0 ** 3)),  # largest at 1.75 2^e: k kept
        lambda: at(bits(rng.standard_normal(576)), 1, bits(1.7578125 * 2.0 ** 3)),  # just past: k - 1
        lambda: at(bits(rng.standard_normal(576) * 2.0 ** -122), 1, bits(1.9 * 2.0 ** -119)),  # exponent cap
        lambda: at(bits(rng.standard_normal(576) * 2.0 ** -121), 1, bits(1.9 * 2.0 ** -118)),  # cap, minus 1
    ]
    n = int(np.prod(lead))
    q = np.stack([patterns[r % len(patterns)]() for r in range(n)]).astype(np.uint16).reshape(*lead, 576)
    q = q.view(ml_dtypes.bfloat16)
    return jnp.asarray(q[..., :512]), jnp.asarray(q[..., 512:])


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
