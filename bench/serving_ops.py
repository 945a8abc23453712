"""Timings of the serving pieces of issue 17 that sit around the kernels (GPU):

- write_kv of 16K new tokens (a prefill chunk) or 64 (one decode step) (Hkv 8, D 128) into a bf16
  or fp8 cache of 4 or 16 GiB (K + V), with and without the unique_slots promise,
  the caches donated and carried through an unrolled chain of writes in one jit (so every write is in
  place, and no while loop's per-iteration host round trip is charged to the writes), per write the
  difference between chains of 25 and 5 writes over 20 (steady state: a call's fixed cost cancels),
  the writes taking four sets of new rows in turn (so L2 does not hold a write's rows);
  bandwidth counts the bytes read (new K/V) and written (cache rows);
- the cost of sinks on decode_b64_ctx4k (Hq 32, Hkv 8, D 128, 64 x 4096 keys): per call, and per
  layer inside one jit of 32 layers.

    python bench/serving_ops.py [--out DIR]     (prints a table; writes DIR/serving_ops.json)
    python bench/serving_ops.py --variants write_kv --tokens 16384 --no-sinks   (an A/B's share)
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxpaged
from jaxpaged import _inputs
from jaxpaged._timing import device_ms

HKV, D, PAGE = 8, 128, 16
WRITES_PER_CALL = 20
SHORT_CHAIN = 5
ROW_SETS = 4
PAIRS = 15  # timed (short, long) chain pairs per case


def _write_flat(k, v, k_new, v_new, slots, *, unique, **fp8):
    """A candidate for write_kv (not the public one): one index per token into the caches viewed
    as [P * page_size, Hkv * D] rows (NHD), one contiguous row per scatter window. unique=True
    tells XLA no two tokens share a slot (duplicates would then be undefined, even mixed rows)."""
    from jaxpaged import _fp8
    rows = k.shape[0] * k.shape[1]
    idx = jnp.where((slots >= 0) & (slots < rows), slots, rows)
    out = []
    for cache, new, scale in ((k, k_new, fp8.get("k_scale")), (v, v_new, fp8.get("v_scale"))):
        new = _fp8.quantize(new, scale, cache.dtype) if scale is not None else new.astype(cache.dtype)
        flat = cache.reshape(rows, -1).at[idx].set(new.reshape(new.shape[0], -1), mode="drop",
                                                    unique_indices=unique)
        out.append(flat.reshape(cache.shape))
    return tuple(out)


def _with_impl(impl, **extra):
    """write_kv through one implementation of the write (jaxpaged.cache_write.WRITE_IMPL)."""
    def write(*args, **kw):
        from jaxpaged import cache_write
        saved, cache_write.WRITE_IMPL = cache_write.WRITE_IMPL, impl
        try:
            return jaxpaged.write_kv(*args, **kw, **extra)
        finally:
            cache_write.WRITE_IMPL = saved
    return write


VARIANTS = {
    "write_kv": jaxpaged.write_kv,  # the default ("auto": the write_rows kernel for >= 1 MiB a cache)
    "write_kv_unique": lambda *a, **kw: jaxpaged.write_kv(*a, unique_slots=True, **kw),
    "rows_unique": _with_impl("rows", unique_slots=True),
    "scatter": _with_impl("scatter"),
    "scatter_unique": _with_impl("scatter", unique_slots=True),
    "flat": lambda *a, **kw: _write_flat(*a, unique=False, **kw),
    "flat_unique": lambda *a, **kw: _write_flat(*a, unique=True, **kw),
}


# (tokens, cache GiB, dtype, slots): "random" - every token at a random slot of the cache (the
# worst case: 2 KiB rows scattered); "pages" - a prefill chunk's way: the tokens fill whole pages,
# in order, of randomly chosen pages (16 tokens = 32 KiB contiguous per page and cache).
CASES = [(16384, 4, jnp.bfloat16, "random"), (16384, 16, jnp.bfloat16, "random"),
         (16384, 4, jnp.float8_e4m3fn, "random"), (64, 4, jnp.bfloat16, "random"),
         (512, 4, jnp.bfloat16, "random"), (2048, 4, jnp.bfloat16, "random"),
         (16384, 4, jnp.bfloat16, "pages"), (16384, 4, jnp.float8_e4m3fn, "pages")]


def write_kv_time(cache_gib: float, dtype, variant: str = "write_kv", tokens: int = 16384,
                  slot_pattern: str = "random") -> dict:
    itemsize = jnp.dtype(dtype).itemsize
    pages = int(cache_gib * 2**30 / 2 / (PAGE * HKV * D * itemsize))
    rng = np.random.default_rng(0)
    k = jnp.zeros((pages, PAGE, HKV, D), dtype)
    v = jnp.zeros((pages, PAGE, HKV, D), dtype)
    # ROW_SETS sets of new rows, taken in turn, so that a write's rows were last read ROW_SETS - 1
    # writes earlier (16K tokens: 192 MiB of other rows between, which L2 cannot hold; with one set,
    # as up to session 36, part of each write's reads could hit L2).
    new_ks = [jnp.asarray(rng.standard_normal((tokens, HKV, D)), jnp.bfloat16) for _ in range(ROW_SETS)]
    new_vs = [jnp.asarray(rng.standard_normal((tokens, HKV, D)), jnp.bfloat16) for _ in range(ROW_SETS)]
    if slot_pattern == "pages":
        chosen = rng.choice(pages, -(-tokens // PAGE), replace=False)
        slots = jnp.asarray((chosen[:, None] * PAGE + np.arange(PAGE)).reshape(-1)[:tokens], jnp.int32)
    else:
        slots = jnp.asarray(rng.choice(pages * PAGE, tokens, replace=False), jnp.int32)
    fp8 = dict(k_scale=0.05, v_scale=0.05) if itemsize == 1 else {}

    def chain(n):
        def writes(k, v, new_ks, new_vs, slots):
            # Unrolled: a rolled loop is an XLA while loop, and session 11 measured 20-31 us per
            # iteration even for 64-token writes - the loop's own per-iteration cost, charged to
            # every write. The chain still updates the donated caches in place. The slots and rows
            # are arguments: as constants, XLA folded the duplicate sort away at compile time.
            for i in range(n):
                k, v = VARIANTS[variant](k, v, new_ks[i % ROW_SETS], new_vs[i % ROW_SETS], slots, **fp8)
            return k, v
        return jax.jit(writes, donate_argnums=(0, 1))
    # Steady state per write: chains of SHORT and SHORT + WRITES_PER_CALL writes, timed in turn
    # (a pair per sample, so drift of the machine falls on both), and the median over PAIRS samples
    # of their difference over WRITES_PER_CALL (a call's fixed cost - dispatch, sync - cancels out).
    # Up to session 38 each chain's median came from its own 7 runs, one chain after the other, and
    # one kernel moved between 49 and 57 us from run to run (NOTES item 59 e); the quartiles of the
    # samples are reported with the median.
    chains = {n: chain(n) for n in (SHORT_CHAIN, SHORT_CHAIN + WRITES_PER_CALL)}
    for writes in chains.values():
        k, v = jax.block_until_ready(writes(k, v, new_ks, new_vs, slots))
    samples = []
    for _ in range(PAIRS):
        took = {}
        for n, writes in chains.items():
            start = time.perf_counter()
            k, v = jax.block_until_ready(writes(k, v, new_ks, new_vs, slots))
            took[n] = time.perf_counter() - start
        samples.append((took[SHORT_CHAIN + WRITES_PER_CALL] - took[SHORT_CHAIN]) / WRITES_PER_CALL * 1e6)
    us = float(np.median(samples))
    q1, q3 = (float(x) for x in np.percentile(samples, [25, 75]))
    moved = 2 * tokens * HKV * D * (2 + itemsize)  # K and V: new rows read (bf16), cache rows written
    # Correctness spot check: the last written rows are the last write's values (quantized for fp8).
    last = (SHORT_CHAIN + WRITES_PER_CALL - 1) % ROW_SETS  # (the long chain ran last)
    err = 0.0
    for cache, new in ((k, new_ks[last]), (v, new_vs[last])):
        got = np.asarray(cache.reshape(-1, HKV, D)[slots[:4]].astype(jnp.float32))
        want = np.asarray(new[:4].astype(jnp.float32))
        err = max(err, float(np.max(np.abs(got * (0.05 if itemsize == 1 else 1.0) - want))))
    return {"variant": variant, "tokens": tokens, "cache_gib": cache_gib, "dtype": jnp.dtype(dtype).name,
            "slots": slot_pattern, "us": us, "us_q1": q1, "us_q3": q3,
            "GBps": moved / us / 1e3, "max_err": err}


def sinks_cost() -> dict:
    rng = np.random.default_rng(1)
    q, k, v, lens, tables, _ = _inputs.paged_inputs(
        rng, q_lens=[1] * 64, kv_lens=[4096] * 64, num_q_heads=32, num_kv_heads=8, head_dim=128, page_size=16,
        dtype="bfloat16", decode=True)
    sinks = jnp.asarray(rng.standard_normal(32), jnp.float32)
    operands = (k, v, lens, tables)  # arguments, not closed over (no cache baked in as a constant)
    layer = lambda q, k, v, lens, tables, s: jaxpaged.paged_attention(q, k, v, lens, tables, sinks=s)  # noqa: E731
    qs = [q * jnp.asarray(1 + 0.001 * i, q.dtype) for i in range(32)]
    call = jax.jit(layer)
    step = jax.jit(lambda qs, *ops: tuple(layer(q_, *ops) for q_ in qs))  # 32 layers, one jit
    return {"call_us": device_ms(call, q, *operands, None) * 1e3,
            "call_sinks_us": device_ms(call, q, *operands, sinks) * 1e3,
            "layer_us": device_ms(step, qs, *operands, None) * 1e3 / 32,
            "layer_sinks_us": device_ms(step, qs, *operands, sinks) * 1e3 / 32}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--tokens", nargs="*", type=int, default=None, help="only the cases of these token counts")
    parser.add_argument("--no-sinks", action="store_true", help="skip the sinks timing")
    args = parser.parse_args()
    result = {"device": jax.devices()[0].device_kind, "date": time.strftime("%Y-%m-%d"),
              "jax": jax.__version__, "write_kv": [], "sinks": None}
    for variant in args.variants:
        for tokens, gib, dtype, pattern in CASES:
            if args.tokens and tokens not in args.tokens:
                continue
            r = write_kv_time(gib, dtype, variant, tokens, pattern)
            result["write_kv"].append(r)
            print(f"{variant} {tokens} tokens ({pattern} slots) into {gib} GiB {r['dtype']}: {r['us']:.1f} us "
                  f"[{r['us_q1']:.1f}-{r['us_q3']:.1f}], {r['GBps']:.0f} GB/s, max err {r['max_err']:.3g}", flush=True)
    s = None if args.no_sinks else sinks_cost()
    result["sinks"] = s
    if s:
        print(f"sinks on decode_b64_ctx4k: per call {s['call_us']:.1f} -> {s['call_sinks_us']:.1f} us "
              f"({100 * (s['call_sinks_us'] / s['call_us'] - 1):+.1f}%), per layer {s['layer_us']:.1f} -> "
              f"{s['layer_sinks_us']:.1f} us ({100 * (s['layer_sinks_us'] / s['layer_us'] - 1):+.1f}%)")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "serving_ops.json"), "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
