"""One benchmark run on the GPU: copy bandwidth, then per config our op and its peers on the same
inputs - FlashMLA (MLA), FlashAttention-3 and JAX's Pallas kernel (paged decode), see
bench/peers.py - and the jnp reference; every output is checked against the reference. Each op is
timed per call and per layer inside a 32-layer step.

    python bench/bench.py --out DIR [--only NAME ...] [--part K/N] [--ours-only]
    python bench/bench.py --out DIR --merge A.json B.json ...

The whole list no longer fits one 600 s device call: run it in parts (`--part 1/2`, `--part 2/2`:
every other config, so each part mixes paged and MLA) in back-to-back calls on the same build, then
--merge their JSONs (configs in list order; copy bandwidth from the first) into DIR/<gpu>.json,
RESULTS.md and the plot.

The peers come from wheels downloaded on a networked machine into .whl/ (see bench/peers.py and
the README); bench/device_run.sh installs them on the GPU machine.

Writes DIR/<gpu>.json (one record per config) and DIR/RESULTS.md (the table for bench/RESULTS.md).
--ours-only times our op alone (still checked against the reference) for quick A/B runs of a
kernel change, and writes DIR/<gpu>_ours.json only; with --ours-step also per layer of a step.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import math
import os
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave room for torch (FlashMLA)

import jax
import jax.numpy as jnp
import numpy as np

import jaxpaged
from jaxpaged import _fp8, _inputs, reference
from jaxpaged._timing import burst_ms, device_ms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402


@dataclasses.dataclass
class Paged:
    name: str
    hq: int = 32
    hkv: int = 8
    batch: int = 64
    ctx: int = 4096
    dim: int = 128
    page: int = 16
    soft_cap: float | None = None
    window: int | None = None
    varlen: tuple[int, int] | None = None  # kv_lens uniform in [lo, hi]
    prefill: tuple[int, int, int] | None = None  # (chunks, chunk_len, chunk_ctx): ragged mix
    kv_dtype: str | None = None  # an fp8 cache (k_scale 0.05, v_scale 0.02); None: q's bf16


@dataclasses.dataclass
class Mla:
    name: str
    heads: int = 128
    batch: int = 64
    ctx: int = 4096
    page: int = 64
    s_q: int = 1
    causal: bool = False
    combined: bool = True
    varlen: tuple[int, int] | None = None
    cache: str = "bf16"  # "fp8": e4m3 combined with kv_scale; "656": DeepSeek-V3.2's rows
    topk: int = 0  # > 0: sparse decode (mla_decode_sparse) over topk distinct tokens of each row's context
    ds_dequant: str = "bfloat16"  # 656-byte rows: "bfloat16" (FlashMLA's reading), "float16" or "float32"
    fp8_math: bool = False  # fp8 caches: mla_decode(..., fp8_math=True) (FlashMLA's fp8 arithmetic)


CONFIGS = [
    Paged("decode_b64_ctx4k"),
    Paged("decode_b8_ctx32k", batch=8, ctx=32768),
    Paged("decode_b256_ctx1k", batch=256, ctx=1024),
    Paged("decode_h64_b32_ctx8k", hq=64, batch=32, ctx=8192),
    Paged("decode_b1_ctx128k", batch=1, ctx=131072),
    Paged("decode_b1_ctx8k", batch=1, ctx=8192),
    Paged("decode_b16_ctx2k", batch=16, ctx=2048),
    Paged("decode_mha_b32_ctx4k", hq=32, hkv=32, batch=32),
    Paged("decode_d256_softcap_b32_ctx8k", hq=16, dim=256, soft_cap=50.0, batch=32, ctx=8192),
    Paged("decode_varlen_b128", batch=128, ctx=8192, varlen=(128, 8192)),
    Paged("mixed_prefill_decode", batch=124, ctx=4096, prefill=(4, 512, 2048)),
    Paged("decode_window_b64_ctx32k", batch=64, ctx=32768, window=4096),
    Paged("decode_fp8_b64_ctx4k", kv_dtype="float8_e4m3fn"),
    Paged("decode_fp8_b8_ctx32k", batch=8, ctx=32768, kv_dtype="float8_e5m2"),
    Paged("decode_fp8_h64_b32_ctx8k", hq=64, batch=32, ctx=8192, kv_dtype="float8_e4m3fn"),
    # head dim 64 with GQA 8 (gpt-oss's attention shape; its sinks and windows aside): the fp8 tile
    # kernel's D = 64 instance (its tiles of <= 8 rows transposed by session 49's prepared patch)
    Paged("decode_fp8_d64_h64_b64_ctx4k", hq=64, dim=64, kv_dtype="float8_e4m3fn"),
    # decode_d256_softcap_b32_ctx8k over an fp8 cache (Gemma 2's head dim and soft cap)
    Paged("decode_fp8_d256_softcap_b32_ctx8k", hq=16, dim=256, soft_cap=50.0, batch=32, ctx=8192,
          kv_dtype="float8_e4m3fn"),
    Mla("mla_h128_b64_ctx4k"),
    Mla("mla_h128_b128_ctx8k", batch=128, ctx=8192),
    Mla("mla_h128_sq2_causal_b64_ctx4k", s_q=2, causal=True),
    Mla("mla_h16_b128_ctx4k_page1", heads=16, batch=128, page=1, combined=False),
    Mla("mla_h128_b1_ctx32k", batch=1, ctx=32768),
    Mla("mla_h128_varlen_b128", batch=128, ctx=16384, varlen=(256, 16384)),
    Mla("mla_h64_b128_ctx4k", heads=64, batch=128),
    Mla("mla_h16_b128_ctx4k_page64", heads=16, batch=128),
    Mla("mla_h128_b4_ctx4k", batch=4),
    # Quantized and sparse MLA (issues 17, 18): on the H100 the wgmma kernel's gathering loader.
    Mla("mla_fp8_h128_b64_ctx4k", cache="fp8"),
    Mla("mla_fp8_h128_b128_ctx8k", batch=128, ctx=8192, cache="fp8"),
    Mla("mla_fp8_h16_b128_ctx4k", heads=16, batch=128, cache="fp8"),
    Mla("mla_fp8math_h128_b64_ctx4k", cache="fp8", fp8_math=True),
    Mla("mla_fp8math_h128_b128_ctx8k", batch=128, ctx=8192, cache="fp8", fp8_math=True),
    Mla("mla_656_h128_b64_ctx4k", cache="656"),
    Mla("mla_656_h16_b128_ctx4k", cache="656", heads=16, batch=128),
    Mla("mla_656exact_h128_b64_ctx4k", cache="656", ds_dequant="float32"),  # (exact: the portable kernel)
    Mla("mla_656f16_h128_b64_ctx4k", cache="656", ds_dequant="float16"),
    Mla("mla_656f16_h16_b128_ctx4k", cache="656", heads=16, batch=128, ds_dequant="float16"),
    # (656-byte rows with fp8_math=True: the wide kernel's fp8 mode; issue 17 compares them with
    # FlashMLA's dense fp8 decode of the mla_fp8math / mla_fp8 configs of the same shape)
    Mla("mla_656fp8math_h128_b64_ctx4k", cache="656", fp8_math=True),
    Mla("mla_656fp8math_h128_b128_ctx8k", cache="656", batch=128, ctx=8192, fp8_math=True),
    Mla("mla_656fp8math_h16_b128_ctx4k", cache="656", heads=16, batch=128, fp8_math=True),
    Mla("sparse_h128_b64_topk2048", cache="656", topk=2048),
    Mla("sparse_h128_b128_topk2048", cache="656", batch=128, topk=2048),
    Mla("sparse_h64_b64_topk2048", cache="656", heads=64, topk=2048),
    Mla("sparse_h16_b64_topk2048", cache="656", heads=16, topk=2048),  # (DeepSeek-V3.2 at TP 8)
    Mla("sparse_h128_sq2_b32_topk2048", cache="656", batch=32, s_q=2, topk=2048),
    Mla("sparse_h128_b64_topk2048_bf16", topk=2048),
    Mla("sparse_h128_b64_topk2048_page1", cache="656", page=1, topk=2048),
    Mla("sparse_h128_b64_topk2048_exact", cache="656", topk=2048, ds_dequant="float32"),
    Mla("sparse_f16_h128_b64_topk2048", cache="656", topk=2048, ds_dequant="float16"),
    Mla("sparse_f16_h128_b128_topk2048", cache="656", batch=128, topk=2048, ds_dequant="float16"),
    Mla("sparse_f16_h64_b64_topk2048", cache="656", heads=64, topk=2048, ds_dequant="float16"),
    Mla("sparse_f16_h16_b64_topk2048", cache="656", heads=16, topk=2048, ds_dequant="float16"),
    # (sparse lists with fp8_math=True: the wide kernel's fp8 mode; FlashMLA beside it reads the rows
    # in bf16 - its rel_err about a tenth of ours)
    Mla("sparse_fp8math_h128_b64_topk2048", cache="656", topk=2048, fp8_math=True),
    Mla("sparse_fp8math_h128_b128_topk2048", cache="656", batch=128, topk=2048, fp8_math=True),
    Mla("sparse_fp8math_h64_b64_topk2048", cache="656", heads=64, topk=2048, fp8_math=True),
    Mla("sparse_fp8math_h16_b64_topk2048", cache="656", heads=16, topk=2048, fp8_math=True),
    Mla("sparse_fp8math_h128_sq2_b32_topk2048", cache="656", batch=32, s_q=2, topk=2048, fp8_math=True),
]


FP8_SCALES = (0.05, 0.02)  # k_scale, v_scale of the fp8 configs (the bf16 cache's values / scale)
MLA_KV_SCALE = 0.02  # kv_scale of the fp8 MLA configs
SLOW_MS = 1.0  # a kernel slower than this per call is timed with fewer calls (the portable ones)


def copy_bandwidth_GBps() -> float:
    """A 2 GiB elementwise pass (read + write counted): the practical ceiling for decode."""
    x = jnp.arange(1 << 29, dtype=jnp.uint32)
    f = jax.jit(lambda a: a ^ jnp.uint32(0x5A5A5A5A))
    ms = device_ms(f, x)
    return 2 * x.size * 4 / ms / 1e6


def paged_inputs(cfg: Paged, rng):
    if cfg.prefill:
        chunks, chunk_len, chunk_ctx = cfg.prefill
        q_lens = [chunk_len] * chunks + [1] * cfg.batch
        kv_lens = [chunk_ctx] * chunks + [cfg.ctx] * cfg.batch
    else:
        q_lens = [1] * cfg.batch
        kv_lens = (rng.integers(cfg.varlen[0], cfg.varlen[1] + 1, cfg.batch) if cfg.varlen
                   else [cfg.ctx] * cfg.batch)
    args = _inputs.paged_inputs(rng, q_lens=q_lens, kv_lens=kv_lens, num_q_heads=cfg.hq, num_kv_heads=cfg.hkv,
                                head_dim=cfg.dim, page_size=cfg.page, dtype=jnp.bfloat16,
                                decode=not cfg.prefill, on_device=True)
    if cfg.kv_dtype:
        q, k, v, *rest = args
        args = (q, _fp8.quantize(k, FP8_SCALES[0], cfg.kv_dtype), _fp8.quantize(v, FP8_SCALES[1], cfg.kv_dtype), *rest)
    lens = np.asarray(kv_lens, np.int64)
    read = np.minimum(lens, cfg.window) if cfg.window else lens
    kv_bytes = int(read.sum()) * cfg.hkv * cfg.dim * 2 * (1 if cfg.kv_dtype else 2)
    # Causal FLOPs: each query row sees its visible keys; QK and PV are 2*D FLOPs per key each.
    flops = 0
    for ql, L in zip(q_lens, kv_lens):
        seen = sum(min(L, L - ql + p + 1) for p in range(ql)) if ql > 1 else min(L, cfg.window or L)
        flops += 4 * cfg.dim * cfg.hq * seen
    return args, kv_bytes, flops


def mla_inputs(cfg: Mla, rng):
    lens = (rng.integers(cfg.varlen[0], cfg.varlen[1] + 1, cfg.batch) if cfg.varlen
            else np.full(cfg.batch, cfg.ctx))
    args = _inputs.mla_inputs(rng, kv_lens=lens, s_q=cfg.s_q, num_heads=cfg.heads, page_size=cfg.page,
                              dtype=jnp.bfloat16, combined=cfg.combined, on_device=True)
    row_bytes = {"bf16": 576 * 2, "fp8": 576, "656": 656}[cfg.cache]
    q_nope, q_pe, ckv, kpe, kv_lens, table = args
    if cfg.cache == "fp8":
        ckv = _fp8.quantize(ckv, MLA_KV_SCALE, jnp.float8_e4m3fn)
    elif cfg.cache == "656":
        ckv = _fp8.pack_ds_rows(ckv[..., :512], ckv[..., 512:])
    if cfg.topk:  # each query row's top-k: distinct positions of its context, as pool slots
        host_table = np.asarray(table)
        idx = np.empty((cfg.batch, cfg.s_q, cfg.topk), np.int32)
        for b in range(cfg.batch):
            for i in range(cfg.s_q):
                pos = rng.choice(int(lens[b]), cfg.topk, replace=False)
                idx[b, i] = host_table[b, pos // cfg.page] * cfg.page + pos % cfg.page
        args = (q_nope, q_pe, ckv, kpe, jnp.asarray(idx))
        return args, cfg.batch * cfg.s_q * cfg.topk * row_bytes, 2 * (576 + 512) * cfg.heads * idx.size
    kv_bytes = int(lens.sum()) * row_bytes
    seen = sum(int(L) - (cfg.s_q - 1 - i if cfg.causal else 0) for L in lens for i in range(cfg.s_q))
    flops = 2 * (576 + 512) * cfg.heads * seen
    return (q_nope, q_pe, ckv, kpe, kv_lens, table), kv_bytes, flops


def mla_options(cfg: Mla) -> dict:
    """mla_decode's keyword options for a dense MLA config: scale, causal and its cache's."""
    opts = dict(scale=1.0 / math.sqrt(192.0), causal=cfg.causal)
    if cfg.cache == "fp8":
        opts["kv_scale"] = MLA_KV_SCALE
    if cfg.cache == "656":
        opts["ds_dequant"] = cfg.ds_dequant
    if cfg.fp8_math:
        opts["fp8_math"] = True
    return opts


def sparse_options(cfg: Mla) -> dict:
    """mla_decode_sparse's keyword options for a sparse MLA config: scale and its cache's reading."""
    opts = dict(scale=1.0 / math.sqrt(192.0))
    if cfg.cache == "656":
        opts["ds_dequant"] = cfg.ds_dequant
    if cfg.fp8_math:
        opts["fp8_math"] = True
    return opts


def run_config(cfg, rng, copy_GBps, ours_only=False, ours_step=False):
    rec = {"config": cfg.name}
    if isinstance(cfg, Mla) and cfg.cache == "656":
        rec["ds_dequant"] = cfg.ds_dequant
    per_step = None
    if isinstance(cfg, Paged):
        args, kv_bytes, flops = paged_inputs(cfg, rng)
        opts = dict(soft_cap=cfg.soft_cap, sliding_window=cfg.window)
        if cfg.kv_dtype:
            opts.update(k_scale=FP8_SCALES[0], v_scale=FP8_SCALES[1])
        ours_q = lambda q, *ops, plan=None: jaxpaged.paged_attention(q, *ops, **opts, plan=plan)  # noqa: E731
        ref = jax.jit(functools.partial(reference.paged_attention, **opts))
        peer_fns = {"pallas": lambda: peers.pallas_paged(cfg, args), "fa3": lambda: peers.fa3_paged(cfg, args)}
        # The tile list made once per step for all layers: ops are (k, v, kv_lens, block_tables, cu_q_lens).
        num_tokens = args[0].shape[0]
        per_step = lambda *ops: dict(plan=jaxpaged.paged_attention_plan(  # noqa: E731
            ops[2], ops[3], ops[4], num_q_heads=cfg.hq, num_kv_heads=cfg.hkv, page_size=cfg.page,
            num_tokens=None if ops[4] is None else num_tokens))
    elif cfg.topk:
        args, kv_bytes, flops = mla_inputs(cfg, rng)
        opts = sparse_options(cfg)
        ours_q = lambda q_nope, *ops, plan=None: jaxpaged.mla_decode_sparse(q_nope, *ops, **opts, plan=plan)[0]  # noqa: E731
        # (exact, as the dense configs' reference: an fp8_math config's rel_err is its arithmetic's)
        ref_opts = {k: v for k, v in opts.items() if k != "fp8_math" and not (cfg.fp8_math and k == "ds_dequant")}
        ref = jax.jit(lambda *a: reference.mla_decode_sparse(*a, **ref_opts)[0])
        peer_fns = {"flashmla": lambda: peers.flashmla_sparse(cfg, args, opts["scale"])}
        # The lists' schedule made once per step (as FlashMLA's metadata): ops are (q_pe, ckv, kpe, indices).
        per_step = lambda *ops: dict(plan=jaxpaged.mla_decode_sparse_plan(ops[3], num_heads=cfg.heads))  # noqa: E731
    else:
        args, kv_bytes, flops = mla_inputs(cfg, rng)
        opts = mla_options(cfg)
        ours_q = lambda q_nope, *ops, plan=None: jaxpaged.mla_decode(q_nope, *ops, **opts, plan=plan)[0]  # noqa: E731
        # (the reference is exact: rel_err of an fp8_math config is the fp8 arithmetic's error)
        # (and of 656-byte rows, against their exact reading)
        ref_opts = {k: v for k, v in opts.items() if k != "fp8_math" and not (cfg.fp8_math and k == "ds_dequant")}
        ref = jax.jit(lambda *a: reference.mla_decode(*a, **ref_opts)[0])
        peer_fns = {"flashmla": lambda: peers.flashmla(cfg, args, opts["scale"], opts.get("kv_scale"))}
        # A serving step makes the schedule once for all layers (as FlashMLA's metadata): ops are
        # (q_pe, ckv, kpe, kv_lens, block_tables).
        per_step = lambda *ops: dict(plan=jaxpaged.mla_decode_plan(  # noqa: E731
            ops[3], ops[4], num_heads=cfg.heads, page_size=cfg.page, s_q=cfg.s_q))
    ours = jax.jit(ours_q)
    q, operands = args[0], args[1:]
    out = ours(q, *operands)
    want = ref(*args)
    rec["rel_err"] = peers.rel_err(out, want)
    # (a slow kernel - the portable ones - is timed with short bursts: a probe first)
    probe_ms = device_ms(ours, q, *operands, calls=2, reps=3)
    timing = {}  # (how far the per-call number is the host's: see device_ms' stats)
    rec["ours_ms"] = probe_ms if probe_ms > SLOW_MS else device_ms(ours, q, *operands, stats=timing)
    if timing:
        rec["ours_dispatch_ms"], rec["ours_min_diff_ms"] = timing["dispatch_ms"], timing["min_diff_ms"]
    slow = dict(calls=1, reps=3) if rec["ours_ms"] > SLOW_MS else {}  # (a 32-call step of a slow kernel)
    if not ours_only or ours_step:
        rec["ours_step_us"] = peers.step_us(ours_q, peers.layer_queries(q), operands, per_step, **slow)
        if per_step is not None:  # (and without the plan: each layer's call makes its own schedule)
            rec["ours_step_noplan_us"] = peers.step_us(ours_q, peers.layer_queries(q), operands, **slow)
    if per_step is not None and not ours_only:
        # Per call with the schedule made once beforehand, as FlashMLA's per-call time reuses its
        # metadata (filled by its first call): the like-for-like per-call number against it.
        plan = jax.jit(per_step)(*operands)["plan"]
        ours_plan = jax.jit(lambda q, *ops: ours_q(q, *ops[:-1], plan=ops[-1]))
        rec["ours_plan_max_diff"] = float(jnp.max(jnp.abs(
            ours_plan(q, *operands, plan).astype(jnp.float32) - out.astype(jnp.float32))))
        rec["ours_plan_ms"] = device_ms(ours_plan, q, *operands, plan)
    if not ours_only:
        rec["ours_burst10_ms"] = burst_ms(ours, q, *operands, reps=3 if slow else 9)
        rec["ref_ms"] = device_ms(ref, *args, calls=2, reps=5)
        for name, run in peer_fns.items():
            try:
                result, why = run()
            except Exception as e:  # a peer failing must not lose the run: record why
                result, why = None, f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
            if result is None:
                rec[f"{name}_note"] = why
                continue
            rec[f"{name}_ms"] = result["ms"]
            rec[f"{name}_step_us"] = result["step_us"]
            rec[f"{name}_rel_err"] = peers.rel_err(result["out"], want)
            if "num_splits" in result:
                rec[f"{name}_num_splits"] = result["num_splits"]
    rec["kv_bytes"] = int(kv_bytes)
    rec["flops"] = int(flops)
    rec["copy_GBps"] = copy_GBps
    rec["ours_GBps"] = kv_bytes / rec["ours_ms"] / 1e6
    rec["pct_of_copy_bw"] = 100 * rec["ours_GBps"] / copy_GBps
    rec["tflops"] = flops / rec["ours_ms"] / 1e9
    rec["floor_ms"] = kv_bytes / copy_GBps / 1e6
    return rec


PEERS = ("flashmla", "fa3", "pallas")


def _fmt(x, spec):
    return format(x, spec) if x is not None else "n/a"


def render_table(records, device, date, jax_version) -> str:
    lines = [f"Measured {date} on {device}, jax {jax_version}, one run of `bench/bench.py`; copy "
             f"bandwidth {records[0]['copy_GBps']:.0f} GB/s (read+write). Per call: steady-state ms "
             "(medians; see device_ms). Per layer: us per layer of a 32-layer step (one jit of 32 calls, timed in "
             "bursts of 3 and 12 steps; "
             "ours with the schedule made once per step, `paged_attention_plan` / `mla_decode_plan` (dense MLA); FlashMLA: one CUDA "
             "graph of 32 calls, its metadata made once). \"ours ms, plan\": per call with the plan made once "
             "beforehand, as FlashMLA's per-call time reuses its metadata (same outputs: ours_plan_max_diff in "
             "the JSON). A peer's ratio > 1 means it is slower than ours.", "",
             "| config | ours ms | ours ms, plan | % copy BW | TFLOP/s | ours us/layer | peer | peer ms | peer us/layer | "
             "peer/ours (call) | peer/ours (call, plan) | peer/ours (layer) | rel err (ours, peer) |",
             "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in records:
        timed = [p for p in PEERS if r.get(f"{p}_ms")] or [None]
        for p in timed:
            pm, ps = (r.get(f"{p}_ms"), r.get(f"{p}_step_us")) if p else (None, None)
            lines.append(
                f"| {r['config']} | {r['ours_ms']:.3f} | {_fmt(r.get('ours_plan_ms'), '.3f')} | "
                f"{r['pct_of_copy_bw']:.1f}% | {r['tflops']:.1f} | "
                f"{_fmt(r.get('ours_step_us'), '.1f')} | {p or 'none'} | {_fmt(pm, '.3f')} | {_fmt(ps, '.1f')} | "
                f"{_fmt(pm / r['ours_ms'] if pm else None, '.2f')} | "
                f"{_fmt(pm / r['ours_plan_ms'] if pm and r.get('ours_plan_ms') else None, '.2f')} | "
                f"{_fmt(ps / r['ours_step_us'] if ps and r.get('ours_step_us') else None, '.2f')} | "
                f"{r['rel_err']:.1e}, {_fmt(r.get(f'{p}_rel_err') if p else None, '.1e')} |")
    notes = [f"- {r['config']}: {p} not timed: {r[f'{p}_note']}" for r in records for p in PEERS
             if r.get(f"{p}_note")]
    return "\n".join(lines + [""] + notes) + "\n"


def plot(records, path) -> bool:
    """% of copy bandwidth per config, ours and each peer (same bytes), as a PNG; False without
    matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [r["config"] for r in records]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(max(8, len(names) * 0.8), 4.5))
    series = [("ours", [r["ours_ms"] for r in records])] + [
        (p, [r.get(f"{p}_ms") for r in records]) for p in PEERS if any(r.get(f"{p}_ms") for r in records)]
    width = 0.8 / len(series)
    for i, (label, times) in enumerate(series):
        pct = [100 * r["floor_ms"] / t if t else 0 for r, t in zip(records, times)]
        ax.bar(x + i * width, pct, width, label=label)
    ax.set_xticks(x + 0.4 - width / 2, names, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("% of copy bandwidth (per call)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=".")
    parser.add_argument("--only", nargs="*", help="config names to run (default: all)")
    parser.add_argument("--ours-only", action="store_true", help="time our op alone (no peers, no reference)")
    parser.add_argument("--ours-step", action="store_true",
                        help="with --ours-only: also time ours per layer of a 32-layer step (with and without a plan)")
    parser.add_argument("--merge", nargs="*", help="JSON files of earlier runs to combine (no timing)")
    parser.add_argument("--part", help="K/N: time only configs K, K+N, K+2N, ... (1-based) of the list")
    args = parser.parse_args()
    if args.merge:
        return merge(args.merge, args.out)
    device = jax.devices()[0].device_kind
    slug = "h100" if "H100" in device else ("h200" if "H200" in device else device.split()[-1].lower())
    date = datetime.date.today().isoformat()
    copy_GBps = copy_bandwidth_GBps()
    print(f"{device}: copy bandwidth {copy_GBps:.0f} GB/s", flush=True)
    os.makedirs(args.out, exist_ok=True)
    records = []
    k, n = map(int, args.part.split("/")) if args.part else (1, 1)
    for index, cfg in enumerate(CONFIGS):
        if args.only and cfg.name not in args.only:
            continue
        if index % n != k - 1:
            continue
        t0 = time.perf_counter()
        seed = sum(map(ord, cfg.name))  # fixed per config, so varlen lengths repeat across runs
        rec = run_config(cfg, np.random.default_rng(seed), copy_GBps, args.ours_only, args.ours_step)
        rec.update(device=device, jax_version=jax.__version__, date=date)
        records.append(rec)
        timed = "  ".join(f"{p} {rec[f'{p}_ms']:.3f}" for p in PEERS if rec.get(f"{p}_ms"))
        step = f"  step {rec['ours_step_us']:.1f} us/layer" if rec.get("ours_step_us") else ""
        if rec.get("ours_plan_ms"):
            step = f"  (plan {rec['ours_plan_ms']:.3f})" + step
        print(f"{cfg.name:<32} ours {rec['ours_ms']:8.3f} ms{step}  {timed}  "
              f"{rec['pct_of_copy_bw']:5.1f}% BW  {rec['tflops']:6.1f} TF/s  err {rec['rel_err']:.1e}  ({time.perf_counter() - t0:.0f} s)", flush=True)
        # Written after every config, so a run cut off by the device's time limit keeps what it timed.
        with open(os.path.join(args.out, f"{slug}_ours.json" if args.ours_only else f"{slug}.json"), "w") as f:
            json.dump(records, f, indent=1)
    if args.ours_only:
        return
    with open(os.path.join(args.out, "RESULTS.md"), "w") as f:
        f.write(render_table(records, device, date, jax.__version__))
    plot(records, os.path.join(args.out, f"{slug}_bandwidth.png"))


def merge(paths, out):
    """One table from the records of several runs (the halves of one run split over device calls)."""
    by_name = {}
    for path in paths:
        with open(path) as f:
            for rec in json.load(f):
                by_name[rec["config"]] = rec
    order = [c.name for c in CONFIGS]
    records = sorted(by_name.values(), key=lambda r: order.index(r["config"]) if r["config"] in order else len(order))
    first = records[0]
    slug = "h100" if "H100" in first["device"] else ("h200" if "H200" in first["device"] else "gpu")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{slug}.json"), "w") as f:
        json.dump(records, f, indent=1)
    with open(os.path.join(out, "RESULTS.md"), "w") as f:
        f.write(render_table(records, first["device"], first["date"], first["jax_version"]))
    plot(records, os.path.join(out, f"{slug}_bandwidth.png"))


if __name__ == "__main__":
    main()
