"""The narrow fp8 MLA kernel (src/mla_decode/sm90/fp8_narrow.cuh) on the GPU: its error against the
reference beside the converting wgmma path's, and the two paths' times, in one process.

    python3 -P tools/mla_fp8_narrow_check.py [--time]

The narrow kernel runs by default (JAXPAGED_MLA_FP8_NARROW=0: the converting path), the variable read at
the extension's first call: so each path runs in its own subprocess (this script calls itself with
--path).
Prints one line per case: max |out - ref| / max |ref|, rel err (as the bench), max |lse - ref|,
max |lse - ref| / max |score| of the row, and with --time the per-call time.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time

import numpy as np


PATHS = {"narrow": "1", "convert": "0"}  # JAXPAGED_MLA_FP8_NARROW of each path


def cases():
    # (name, heads, s_q, page, causal, kv_lens, query factor, cache format)
    return [
        ("h16 b4 mixed", 16, 1, 64, False, [0, 1000, 4100, 63], 1.0, "e4m3"),
        ("h16 b3 page128", 16, 1, 128, False, [300, 77, 2000], 1.0, "e4m3"),
        ("h8 sq2 causal", 8, 2, 64, True, [1, 65, 700], 1.0, "e4m3"),
        ("h16 e5m2", 16, 1, 64, False, [500, 3000], 1.0, "e5m2"),
        ("h16 q x 2^20", 16, 1, 64, False, [300, 77], 2.0**20, "e4m3"),
        ("h16 q x 8 (peaked)", 16, 1, 64, False, [2048, 4096], 8.0, "e4m3"),
        ("h16 b128 4K (bench)", 16, 1, 64, False, [4096] * 128, 1.0, "e4m3"),
    ]


def case_args(case):
    """mla_decode's positional arguments for one of cases(): bf16 queries (x the case's factor), the
    combined cache quantized at kv_scale 0.02, lengths and a table with junk entries, poisoned pages."""
    import jax.numpy as jnp

    from jaxpaged import _fp8, _inputs

    _, heads, s_q, page, _, kv_lens, factor, fmt = case
    rng = np.random.default_rng(0)
    q_nope, q_pe, ckv, _, lens, table = _inputs.mla_inputs(
        rng, kv_lens=kv_lens, s_q=s_q, num_heads=heads, page_size=page, dtype="bfloat16", combined=True,
        spare_pages=2, spare_entries=1, junk_ids=[-1, 1 << 30], poisoned=True)
    q_nope = (q_nope.astype(jnp.float32) * factor).astype(jnp.bfloat16)
    q_pe = (q_pe.astype(jnp.float32) * factor).astype(jnp.bfloat16)
    dtype = jnp.float8_e5m2 if fmt == "e5m2" else jnp.float8_e4m3fn
    return (q_nope, q_pe, _fp8.quantize(ckv, 0.02, dtype), None, lens, table)


def run_path(timing: bool):
    import jax

    import jaxpaged
    from jaxpaged import reference

    rows = []
    for case in cases():
        name, causal = case[0], case[4]
        args = case_args(case)
        f = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, causal=causal, kv_scale=0.02))
        out, lse = f(*args)
        ref, ref_lse = reference.mla_decode(*args, scale=0.07, causal=causal, kv_scale=0.02)
        out, ref = np.asarray(out, np.float32), np.asarray(ref, np.float32)
        lse, ref_lse = np.asarray(lse), np.asarray(ref_lse)
        fin = np.isfinite(ref)
        nan_ok = bool(np.array_equal(np.isnan(out), np.isnan(ref)))
        d = np.abs(out - ref)[fin]
        rel = float(np.linalg.norm(d) / max(np.linalg.norm(ref[fin]), 1e-30))
        lfin = np.isfinite(ref_lse)
        dl = np.abs(lse - ref_lse)[lfin]
        row = dict(name=name, max_abs=float(d.max(initial=0)), rel=rel, lse_abs=float(dl.max(initial=0)),
                   lse_rel=float((dl / np.maximum(np.abs(ref_lse[lfin]), 1)).max(initial=0)), nan_ok=nan_ok,
                   lse_inf_ok=bool(np.array_equal(np.isinf(lse), np.isinf(ref_lse))))
        if timing:
            for _ in range(3):
                jax.block_until_ready(f(*args))
            n = 20
            t0 = time.perf_counter()
            for _ in range(n):
                r = f(*args)
            jax.block_until_ready(r)
            row["ms"] = (time.perf_counter() - t0) / n * 1e3
        rows.append(row)
    print(json.dumps(rows))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--path", choices=list(PATHS))
    a = ap.parse_args()
    if a.path:
        run_path(a.time)
        return
    results = {}
    for path, mode in PATHS.items():
        env = dict(os.environ, JAXPAGED_MLA_FP8_NARROW=mode)
        cmd = [sys.executable, "-P", os.path.abspath(__file__), "--path", path] + (["--time"] if a.time else [])
        res = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if res.returncode != 0:
            print(path, "failed:\n", res.stderr[-4000:])
            results[path] = []
            continue
        results[path] = json.loads(res.stdout.strip().splitlines()[-1])
    print(f"{'case':22} {'path':7} {'max|d|':>9} {'rel':>9} {'lse|d|':>9} {'lse rel':>9} nan inf {'ms':>7}")
    for i, c in enumerate(cases()):
        for path in PATHS:
            if i < len(results[path]):
                r = results[path][i]
                print(f"{c[0]:22} {path:7} {r['max_abs']:9.2e} {r['rel']:9.2e} {r['lse_abs']:9.2e} {r['lse_rel']:9.2e} "
                      f"{'ok' if r['nan_ok'] else 'BAD':3} {'ok' if r['lse_inf_ok'] else 'BAD':3} {r.get('ms', float('nan')):7.3f}")


if __name__ == "__main__":
    main()
