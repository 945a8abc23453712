"""The main job: run both ops on the default device with a realistic config, check them against
the reference, and print time and achieved bandwidth.  Usage: python -m jaxpaged [--small]"""

from __future__ import annotations

import argparse
import functools

import jax
import jax.numpy as jnp
import numpy as np

import jaxpaged
from jaxpaged import reference
from jaxpaged._inputs import mla_inputs, paged_inputs
from jaxpaged._timing import median_ms


def _paged_inputs(rng, batch, ctx, hq, hkv, dim, page, dtype):
    q, k, v, lens, table, _ = paged_inputs(rng, q_lens=[1] * batch, kv_lens=[ctx] * batch, num_q_heads=hq,
                                           num_kv_heads=hkv, head_dim=dim, page_size=page, dtype=dtype,
                                           decode=True, on_device=True)
    return (q, k, v, lens, table), 2 * k.size * k.dtype.itemsize


def _mla_inputs(rng, batch, ctx, heads, page, dtype):
    args = mla_inputs(rng, kv_lens=[ctx] * batch, s_q=1, num_heads=heads, page_size=page, dtype=dtype,
                      on_device=True)
    cache = args[2]
    return args, cache.size * cache.dtype.itemsize


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", action="store_true", help="CPU-sized problem even on a GPU")
    args = parser.parse_args(argv)
    on_gpu = jax.default_backend() == "gpu" and not args.small
    dtype = jnp.bfloat16
    rng = np.random.default_rng(0)
    # Realistic on a GPU (a Llama-3-8B-like decode batch; DeepSeek-V3 MLA); small on CPU.
    paged_cfg = dict(batch=64, ctx=4096, hq=32, hkv=8, dim=128, page=16) if on_gpu else \
        dict(batch=4, ctx=512, hq=8, hkv=2, dim=128, page=16)
    mla_cfg = dict(batch=64, ctx=4096, heads=128, page=64) if on_gpu else dict(batch=2, ctx=256, heads=16, page=64)
    scale = 1.0 / np.sqrt(192.0)
    jobs = [
        ("paged_attention", paged_cfg, *_paged_inputs(rng, dtype=dtype, **paged_cfg),
         jaxpaged.paged_attention, reference.paged_attention),
        ("mla_decode", mla_cfg, *_mla_inputs(rng, dtype=dtype, **mla_cfg),
         functools.partial(jaxpaged.mla_decode, scale=scale), functools.partial(reference.mla_decode, scale=scale)),
    ]
    print(f"jaxpaged {jaxpaged.__version__} on {jax.devices()[0].device_kind} (jax {jax.__version__})")
    print(f"{'op':<16} {'config':<52} {'ms':>9} {'GB/s':>8} {'max err':>9}")
    ok = True
    for name, cfg, inputs, kv_bytes, op, ref in jobs:
        fn = jax.jit(op)
        out = fn(*inputs)
        out = out[0] if isinstance(out, tuple) else out
        want = ref(*inputs)
        want = want[0] if isinstance(want, tuple) else want
        err = float(jnp.max(jnp.abs(out.astype(jnp.float32) - want.astype(jnp.float32))))
        ok &= err < 5e-2 and not bool(jnp.isnan(out).any())
        ms = median_ms(fn, *inputs)
        config = " ".join(f"{k}={v}" for k, v in cfg.items())
        print(f"{name:<16} {config:<52} {ms:9.3f} {kv_bytes / ms / 1e6:8.1f} {err:9.2e}")
    print("all outputs match the reference" if ok else "MISMATCH against the reference")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
