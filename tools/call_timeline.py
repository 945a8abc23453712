"""The GPU timeline of one bench config's calls: each kernel's duration and the idle gap before it,
averaged over the last calls of a back-to-back burst, to see what a call's time is made of (the
schedule, the attention kernel, the merge, launch gaps). Uses torch.profiler (CUPTI records every
kernel of the process, JAX's included), so it needs torch on the GPU machine.

    python3 tools/call_timeline.py mla_fp8_h16_b128_ctx4k [--plan] [--calls 40] [--flashmla] [--pool 128]
    python3 tools/call_timeline.py mla_h128_b64_ctx4k --step [--flashmla]

--step (dense MLA): a serving step instead - one jit of 32 layers' calls with the plan made once
(bench.py's per-layer timing), and with --flashmla its CUDA graph of 32 calls; prints per kernel
name its count in a step, mean duration and mean gap before it, then the step's span / 32 and the
part of it the GPU sat idle between steps (where a layer's time goes between kernels; session 35
read a host-bound b4 step's idle time as span until this was split out, NOTES item 56 d).

Prints one line per kernel (or memcpy / memset) position in a call: name, mean duration (us), mean
gap before it (us), then the mean span of a call (first kernel start to the next call's first
kernel start). Session 25 measured with it where an MLA call's time goes (NOTES item 46 b).
"""

import argparse
import collections
import math
import sys

import jax
import jax.numpy as jnp
import numpy as np

import jaxpaged

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/bench")
import peers  # noqa: E402
import profile_one  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--plan", action="store_true")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--flashmla", action="store_true", help="then FlashMLA's calls on the same inputs")
    parser.add_argument("--pool", type=int, default=0,
                        help="dense MLA: fold the block table onto this many pages (tiles from L2)")
    parser.add_argument("--step", action="store_true", help="dense MLA: a 32-layer step per 'call' (see above)")
    args = parser.parse_args()
    if args.step:
        if args.plan or args.pool:
            parser.error("--step makes its own plan once per step; no --plan / --pool")
        for name in args.configs:
            step_timeline(name, args.calls, args.flashmla)
        return
    for name in args.configs:
        fn, operands, cfg = profile_one.op_and_args(name, args.plan)
        if args.pool:  # the block table folded onto `pool` pages (dense MLA: operands end with it)
            if type(cfg).__name__ != "Mla" or cfg.topk or args.plan:
                parser.error("--pool takes dense MLA configs, without --plan (made from the unfolded table)")
            *rest, table = operands
            operands = (*rest, jnp.asarray(np.asarray(table) % args.pool, table.dtype))
        label = f"{name}{' (plan)' if args.plan else ''}{f' pool {args.pool}' if args.pool else ''}"
        run = lambda n: jax.block_until_ready([fn(*operands) for _ in range(n)])  # noqa: E731
        report(label, run, args.calls)
        if args.flashmla:
            call, t_qs = peers.flashmla_call(cfg, operands[:6], 1.0 / math.sqrt(192.0))
            if call is None:
                print(f"== {label} FlashMLA not run: {t_qs}")
                continue
            run = lambda n: [call(t_qs[i % len(t_qs)]) for i in range(n)]  # noqa: E731
            report(label + " FlashMLA", run, args.calls)


def step_timeline(name, n_steps, flashmla):
    """The kernels of a 32-layer step (ours with the plan made once; FlashMLA's graph of 32 calls)."""
    fn, operands, cfg = profile_one.op_and_args(name)
    if type(cfg).__name__ != "Mla" or cfg.topk:
        raise SystemExit(f"--step takes dense MLA configs ({name} is not one)")
    q_nope, *ops = operands
    qs = peers.layer_queries(q_nope)
    # (ops: q_pe, ckv, kpe, kv_lens, block_tables; the plan made once per step, as bench.py's)
    step = peers.step_fn(lambda q, *ops, plan: fn(q, *ops, plan=plan)[0], lambda *ops: dict(
        plan=jaxpaged.mla_decode_plan(ops[3], ops[4], num_heads=cfg.heads, page_size=cfg.page, s_q=cfg.s_q)))
    report(f"{name} step of {len(qs)} layers", lambda n: jax.block_until_ready([step(qs, *ops) for _ in range(n)]),
           n_steps, per_step=len(qs))
    if flashmla:
        import torch
        call, t_qs = peers.flashmla_call(cfg, operands[:6], 1.0 / math.sqrt(192.0))
        if call is None:
            print(f"== {name} FlashMLA not run: {t_qs}")
            return
        call(t_qs[0])  # fills its metadata, reused by the graph's calls
        torch.cuda.synchronize()
        graph = peers.flashmla_step_graph(call, t_qs)
        report(f"{name} FlashMLA graph of {len(t_qs)} calls", lambda n: [graph.replay() for _ in range(n)],
               n_steps, per_step=len(t_qs))


def report(label, run, n_calls, per_step=0):
    """Runs a warm-up, then n_calls calls under the profiler; prints the mean per-kernel timeline."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    run(5)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run(n_calls)
        torch.cuda.synchronize()
    events = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                    key=lambda e: e.time_range.start)
    # (memcpy / memset activity too: anything XLA puts between the kernels shows as its own line)
    kernels = list(events)
    if not kernels:
        print(label, ": no GPU events recorded")
        return
    # A call starts with the first kernel's name seen (the schedule, or the attention kernel).
    first = kernels[0].name
    calls, cur = [], []
    for e in kernels:
        if e.name == first and cur:
            calls.append(cur)
            cur = []
        cur.append(e)
    calls.append(cur)
    calls = calls[len(calls) // 2:-1]  # steady state; the last has no next call
    dur, gap, names = collections.defaultdict(list), collections.defaultdict(list), {}
    spans = []
    for i, c in enumerate(calls):
        prev_end = None
        for k, e in enumerate(c):
            names[k] = e.name
            dur[k].append(e.time_range.elapsed_us())
            if prev_end is not None:
                gap[k].append(e.time_range.start - prev_end)
            prev_end = e.time_range.end
        nxt = calls[i + 1][0] if i + 1 < len(calls) else None
        if nxt is not None:
            spans.append(nxt.time_range.start - c[0].time_range.start)
            gap[len(c)].append(nxt.time_range.start - prev_end)
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    if per_step:  # a step: the recorded events cut into n_calls equal runs, kernels by name
        if len(kernels) % n_calls:
            print(f"== {label}: {len(kernels)} GPU events in {n_calls} steps, not a whole number per step")
            return
        size = len(kernels) // n_calls
        calls = [kernels[i:i + size] for i in range(0, len(kernels), size)][n_calls // 2:]
        by_name = collections.defaultdict(lambda: [0, 0.0, 0.0])
        spans, idle = [], []
        for i, c in enumerate(calls):
            prev_end = None
            for e in c:
                rec = by_name[e.name]
                rec[0] += 1
                rec[1] += e.time_range.elapsed_us()
                if prev_end is not None:
                    rec[2] += e.time_range.start - prev_end
                prev_end = e.time_range.end
            if i + 1 < len(calls):
                spans.append(calls[i + 1][0].time_range.start - c[0].time_range.start)
                idle.append(calls[i + 1][0].time_range.start - max(e.time_range.end for e in c))
        n = len(calls)
        print(f"== {label}: {n} steps; per step: count, mean duration, mean gap before (us)")
        for k, (cnt, d, g) in by_name.items():
            print(f"  {k[:70]:70s} x{cnt / n:5.1f} {d / cnt:8.1f} us  (gap before {g / cnt:5.1f})")
        # (the span includes the GPU's idle time between steps: a host that dispatches a step more
        # slowly than the GPU runs it shows there, not in the kernels' times)
        print(f"  step span / {per_step} {mean(spans) / per_step:8.1f} us per layer, of which idle between "
              f"steps {mean(idle) / per_step:6.1f}")
        return
    print(f"== {label}: {len(calls)} calls")
    for k in sorted(names):
        print(f"  {names[k][:70]:70s} {mean(dur[k]):8.1f} us  (gap before {mean(gap[k]):5.1f})")
    print(f"  gap to the next call {mean(gap[max(names) + 1]):5.1f} us; call span {mean(spans):8.1f} us")


if __name__ == "__main__":
    main()
