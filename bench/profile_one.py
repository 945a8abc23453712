"""Runs one bench config's op a few times, for a profiler (ncu / nsys) to capture; with --flashmla
also FlashMLA's dense decode on the same inputs (MLA configs), so one profile holds both.

    ncu -k regex:mla_wgmma -c 1 --section SpeedOfLight python bench/profile_one.py mla_h128_b64_ctx4k
    ncu -k regex:mla -c 12 --set full -o b4 python bench/profile_one.py mla_h128_b4_ctx4k --plan --flashmla
(`bash bench/device_run.sh profile` runs the second form and exports its pages as text.)
--plan: our calls read a plan made once (mla_decode_plan / paged_attention_plan), as in a serving
step; the plan op's kernel then runs once, before them (sparse MLA configs take none: ignored).
Sparse MLA configs run mla_decode_sparse, and with --flashmla FlashMLA's sparse decode.
"""

import argparse
import functools
import math
import sys

import jax
import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bench  # noqa: E402
import peers  # noqa: E402
import jaxpaged  # noqa: E402


def op_and_args(name: str, plan: bool = False):
    """The jitted op of bench config `name`, its inputs (the bench's data, seed 0) and the config;
    with plan=True the op takes the plan as its last argument, and the inputs end with one."""
    cfg = next(c for c in bench.CONFIGS if c.name == name)
    rng = np.random.default_rng(0)
    if isinstance(cfg, bench.Paged):
        args, _, _ = bench.paged_inputs(cfg, rng)
        fn = functools.partial(jaxpaged.paged_attention, soft_cap=cfg.soft_cap, sliding_window=cfg.window)
        make_plan = lambda q, k, v, lens, table, cu: jaxpaged.paged_attention_plan(  # noqa: E731
            lens, table, cu, num_q_heads=cfg.hq, num_kv_heads=cfg.hkv, page_size=cfg.page,
            num_tokens=None if cu is None else q.shape[0])
    elif cfg.topk:  # sparse MLA (no plan: its schedule is made per call)
        args, _, _ = bench.mla_inputs(cfg, rng)
        return jax.jit(functools.partial(jaxpaged.mla_decode_sparse, **bench.sparse_options(cfg))), args, cfg
    else:
        args, _, _ = bench.mla_inputs(cfg, rng)
        fn = functools.partial(jaxpaged.mla_decode, **bench.mla_options(cfg))
        make_plan = lambda q_nope, q_pe, ckv, kpe, lens, table: jaxpaged.mla_decode_plan(  # noqa: E731
            lens, table, num_heads=cfg.heads, page_size=cfg.page, s_q=cfg.s_q)
    if plan:
        return jax.jit(lambda *a: fn(*a[:-1], plan=a[-1])), (*args, jax.jit(make_plan)(*args)), cfg
    return jax.jit(fn), args, cfg


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--plan", action="store_true", help="our calls read a plan made once")
    parser.add_argument("--flashmla", action="store_true", help="then FlashMLA on the same inputs (MLA)")
    args = parser.parse_args()
    fn, operands, cfg = op_and_args(args.config, args.plan)
    with_plan = args.plan and not getattr(cfg, "topk", 0)  # (sparse MLA takes no plan)
    for _ in range(args.calls):
        jax.block_until_ready(fn(*operands))
    if args.flashmla:
        peer_call = peers.flashmla_sparse_call if getattr(cfg, "topk", 0) else peers.flashmla_call
        peer_args = (operands[:-1] if with_plan else operands, 1.0 / math.sqrt(192.0))
        if getattr(cfg, "cache", "") == "fp8" and not getattr(cfg, "topk", 0):  # (FlashMLA's fp8 kernel)
            peer_args += (bench.MLA_KV_SCALE,)
        call, t_qs = peer_call(cfg, *peer_args)
        if call is None:
            print("FlashMLA not run:", t_qs)
            return
        import torch
        for i in range(args.calls):  # (its first call also fills the scheduling metadata)
            call(t_qs[i % len(t_qs)])
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
