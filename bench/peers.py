"""The peers timed beside our ops in bench/bench.py, on the same inputs:

- FlashMLA (torch; the `sgl-flash-mla` wheel, its SM90 dense decode via use_legacy=True) for MLA
  configs with the combined cache and 64-token pages; inputs shared with JAX through DLPack.
- FlashAttention-3 from JAX (the `flash-attn3-jax` wheel) for paged decode with head dim <= 128
  and no soft cap; best of num_splits 1..32.
- JAX's Pallas paged attention (decode only; no window, no ragged prefill).

Each timing is per call (steady-state burst difference) and per layer inside a 32-layer step: one
jit of 32 calls (ours, FA3, Pallas) or one CUDA graph of 32 calls (FlashMLA, its scheduling
metadata filled before capture), a different q per layer, the same caches and tables. Each peer
returns (result dict, None) or (None, why it was not timed); its output is compared with ours.
"""

from __future__ import annotations

import functools
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxpaged._timing import device_ms

LAYERS = 32


def layer_queries(q, layers: int = LAYERS):
    """`layers` distinct queries shaped like q (each layer attends its own)."""
    return [q * jnp.asarray(1.0 + 0.001 * i, q.dtype) for i in range(layers)]


# Every timed function takes its operands as arguments: arrays closed over by a jitted function
# would be baked into the program as constants (gigabytes of cache).


def call_ms(fn, q, operands) -> float:
    """Per-call time (ms) of jit(fn)(q, *operands)."""
    return device_ms(jax.jit(fn), q, *operands)


# A step is LAYERS calls, so its timing takes shorter bursts than one call's (device_ms' default
# 10 and 40 calls, 9 times): bursts of 3 and 12 steps, 5 times, i.e. 288 extra layer calls per
# sample. The step timings were a large part of a full run (~1300 s in session 17, more than a
# session's device budget); the burst difference still cancels the fixed part.
STEP_TIMING = dict(calls=3, reps=5)


def step_fn(fn, per_step=None):
    """One jit of a serving step, step(qs, *operands): fn(q, *operands) once per q in qs;
    per_step(*operands) -> keyword arguments made once per step for every call (an MLA plan)."""
    def step(qs, *ops):
        kw = per_step(*ops) if per_step is not None else {}
        return tuple(fn(q, *ops, **kw) for q in qs)
    return jax.jit(step)


def step_us(fn, qs, operands, per_step=None, **timing) -> float:
    """Per-layer time (us) of step_fn(fn, per_step) over the layers' queries qs."""
    return device_ms(step_fn(fn, per_step), qs, *operands, **{**STEP_TIMING, **timing}) * 1e3 / len(qs)


def rel_err(out, ref) -> float:
    out, ref = (np.asarray(jnp.asarray(x, jnp.float32)) for x in (out, ref))
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def pallas_paged(cfg, args):
    """JAX's Pallas GPU paged attention (decode only): best of k_splits 16/8/4 in its layout."""
    if cfg.prefill or cfg.window:
        return None, "no ragged prefill / sliding window support"
    if cfg.kv_dtype:
        return None, "no fp8 cache support"
    from jax.experimental.pallas.ops.gpu import paged_attention as pallas_mod
    q, k, v, lens, table, _ = args
    operands = (*(jnp.transpose(x, (2, 0, 1, 3)) for x in (k, v)), table, lens)  # [Hkv, pages, page, D]
    scale = 1.0 / math.sqrt(cfg.dim)
    best, err = None, None
    for k_splits in (16, 8, 4):
        try:
            fn = functools.partial(pallas_mod.paged_attention, k_splits=k_splits,
                                   attn_logits_soft_cap=cfg.soft_cap)
            call = lambda q_, *ops, fn=fn: fn(q_ * jnp.asarray(scale, q_.dtype), *ops)  # noqa: E731
            ms = call_ms(call, q, operands)
            if best is None or ms < best[0]:
                best = (ms, call)
        except Exception as e:  # a configuration Pallas rejects; report the reason
            err = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    if best is None:
        return None, err
    ms, call = best
    return {"ms": ms, "out": jax.jit(call)(q, *operands),
            "step_us": step_us(call, layer_queries(q), operands)}, None


def fa3_paged(cfg, args):
    """FlashAttention-3 (flash-attn3-jax) on pure decode: q [B, 1, Hq, D] over the same NHD cache."""
    if cfg.prefill:
        return None, "ragged prefill not wired to FA3's varlen API"
    if cfg.kv_dtype:
        return None, "fp8 KV caches not wired (flash-attn3-jax takes q, k, v of one dtype)"
    if cfg.soft_cap:
        return None, "no soft cap in flash-attn3-jax's kvcache API"
    if cfg.dim > 128:
        return None, "head dim > 128 not built in the flash-attn3-jax wheel"
    try:
        from flash_attn3_jax import flash_mha_with_kvcache
    except ImportError as e:
        return None, f"flash-attn3-jax not installed ({e})"
    q, k, v, lens, table, _ = args
    operands = (k, v, lens, table)
    window = (cfg.window - 1, 0) if cfg.window else (-1, -1)
    best, err = None, None
    for splits in (1, 2, 4, 8, 16, 32):
        call = lambda q_, k_, v_, lens_, table_, s=splits: flash_mha_with_kvcache(  # noqa: E731
            q_[:, None], k_, v_, cache_seqlens=lens_, page_table=table_, softmax_scale=1.0 / math.sqrt(cfg.dim),
            is_causal=True, window_size=window, num_splits=s)[:, 0]
        try:
            ms = call_ms(call, q, operands)
        except Exception as e:
            err = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
            continue
        if best is None or ms < best[0]:
            best = (ms, splits, call)
    if best is None:
        return None, err
    ms, splits, call = best
    return {"ms": ms, "num_splits": splits, "out": jax.jit(call)(q, *operands),
            "step_us": step_us(call, layer_queries(q), operands)}, None


def _torch_ms(fn, calls: int = 10, reps: int = 9) -> float:
    """device_ms for a torch callable: bursts of n and 4n calls, the difference per extra call."""
    import torch

    def burst(n):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        return time.perf_counter() - start
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    return float(np.median([(burst(4 * calls) - burst(calls)) / (3 * calls) * 1e3 for _ in range(reps)]))


def flashmla(cfg, args, scale: float, kv_scale=None):
    """FlashMLA's dense SM90 decode (sgl-flash-mla, use_legacy=True) on our inputs."""
    call, t_qs = flashmla_call(cfg, args, scale, kv_scale)
    if call is None:
        return None, t_qs
    return _flashmla_timed(call, t_qs)


def flashmla_call(cfg, args, scale: float, kv_scale=None):
    """(call(t_q), torch queries of LAYERS layers) of FlashMLA's dense decode on our inputs, or
    (None, why not). An fp8 cache (e4m3 combined, read as value x kv_scale) runs FlashMLA's dense
    fp8 kernel, which takes fp8 queries: ours quantized per tensor (|q| max over the layers' queries
    to 448, descale_q), the same cache bytes with descale_k = kv_scale - the comparison issue 17
    sets; its error against the reference (of our bf16 queries) is recorded beside its time."""
    if cfg.page != 64 or not cfg.combined:
        return None, "FlashMLA needs 64-token pages and the combined 576-wide cache"
    if cfg.cache not in ("bf16", "fp8") or (cfg.cache == "fp8" and kv_scale is None):
        return None, "FlashMLA's dense decode reads bf16 or fp8 (with kv_scale) combined caches"
    try:
        import flash_mla
        import torch
    except ImportError as e:
        return None, f"sgl-flash-mla / torch not installed ({e})"
    q_nope, q_pe, ckv, _, lens, table = args
    q = jnp.concatenate([q_nope, q_pe], axis=-1)  # [B, s_q, Hq, 576]
    qs = layer_queries(q)
    jax.block_until_ready((qs, ckv, lens, table))
    t_table, t_lens = torch.from_dlpack(table), torch.from_dlpack(lens)
    meta, _ = flash_mla.get_mla_metadata()
    fp8 = {}  # (the fp8 kernel's own arguments)
    if cfg.cache == "fp8":
        amax = max(float(jnp.max(jnp.abs(x.astype(jnp.float32)))) for x in qs)
        dq = max(amax, 1e-30) / 448.0
        t_qs = [(torch.from_dlpack(x).float() / dq).to(torch.float8_e4m3fn) for x in qs]
        # (the fp8 bytes through DLPack as uint8, viewed back as e4m3 on the torch side)
        t_kv = torch.from_dlpack(jax.lax.bitcast_convert_type(ckv, jnp.uint8)).view(torch.float8_e4m3fn).unsqueeze(2)
        fp8 = dict(is_fp8_kvcache=True, descale_q=torch.tensor([dq], dtype=torch.float32, device=t_kv.device),
                   descale_k=torch.tensor([float(kv_scale)], dtype=torch.float32, device=t_kv.device))
        # Its dense fp8 scheduler is an op of its own, made before the first call.
        meta.tile_scheduler_metadata, meta.num_splits = flash_mla.get_mla_decoding_metadata(
            t_lens, cfg.s_q * cfg.heads, 1, is_fp8_kvcache=True, use_legacy=True)
    else:
        t_qs = [torch.from_dlpack(x) for x in qs]
        t_kv = torch.from_dlpack(ckv).unsqueeze(2)  # [P, 64, 1, 576]

    def call(t_q):
        return flash_mla.flash_mla_with_kvcache(t_q, t_kv, t_table, t_lens, 512, meta, None, softmax_scale=scale,
                                                causal=cfg.causal, use_legacy=True, **fp8)
    return call, t_qs


def flashmla_sparse(cfg, args, scale: float):
    """FlashMLA's SM90 sparse decode (sgl-flash-mla, use_legacy=True) on our 656-byte rows and
    index lists (its cache as float8_e4m3fn [P, 64, 1, 656], no block table)."""
    call, t_qs = flashmla_sparse_call(cfg, args, scale)
    if call is None:
        return None, t_qs
    return _flashmla_timed(call, t_qs)


def flashmla_sparse_call(cfg, args, scale: float):
    """(call(t_q), torch queries of LAYERS layers) of FlashMLA's sparse decode on our inputs (the
    args of a sparse config: q_nope, q_pe, rows, None, indices), or (None, why not)."""
    if cfg.page != 64 or cfg.cache != "656":
        return None, "FlashMLA's sparse decode takes 656-byte rows in 64-token pages"
    if cfg.ds_dequant == "float32":  # (its time is the bfloat16 config's: not timed again)
        return None, "FlashMLA reads 656-byte rows with bf16 dequantization only"
    # (ours with ds_dequant="float16" reads the same rows more exactly: its time stands beside)
    try:
        import flash_mla
        import torch
    except ImportError as e:
        return None, f"sgl-flash-mla / torch not installed ({e})"
    q_nope, q_pe, rows, _, idx = args
    qs = layer_queries(jnp.concatenate([q_nope, q_pe], axis=-1))
    jax.block_until_ready((qs, rows, idx))
    t_qs = [torch.from_dlpack(x) for x in qs]
    t_kv = torch.from_dlpack(rows).view(torch.float8_e4m3fn).unsqueeze(2)  # [P, 64, 1, 656]
    t_idx = torch.from_dlpack(idx)
    meta, _ = flash_mla.get_mla_metadata()

    def call(t_q):
        return flash_mla.flash_mla_with_kvcache(t_q, t_kv, None, None, 512, meta, None, softmax_scale=scale,
                                                indices=t_idx, use_legacy=True)
    return call, t_qs


def flashmla_step_graph(call, t_qs):
    """A serving step of FlashMLA: one CUDA graph of call(t_q) for each layer's queries (its
    metadata filled by an earlier call, as a serving stack makes it once per step)."""
    import torch
    graph = torch.cuda.CUDAGraph()
    # thread_local: a CUDA call that JAX's own threads make meanwhile (an allocation, a sync) must
    # not void this thread's capture (session 52's full run lost part 1 to "operation failed due to
    # a previous error during capture" on mla_fp8math_h128_b128_ctx8k; session 47's ran it clean).
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for t_q in t_qs:
            call(t_q)
    return graph


def _flashmla_timed(call, t_qs):
    """Output, per-call ms and per-layer us (one CUDA graph of 32 calls) of a FlashMLA call."""
    import torch
    out, _ = call(t_qs[0])  # fills the scheduling metadata, reused by every later call
    torch.cuda.synchronize()
    result = {"out": np.asarray(out.float().cpu()), "ms": _torch_ms(lambda: call(t_qs[0]))}
    result["step_us"] = _torch_ms(flashmla_step_graph(call, t_qs).replay, **STEP_TIMING) * 1e3 / LAYERS
    return result, None
