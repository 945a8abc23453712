"""The GPU timeline of one bench config's calls: each kernel's duration and the idle gap before it,
averaged over the last calls of a back-to-back burst, to see what a call's time is made of (the
schedule, the attention kernel, the merge, launch gaps). Uses torch.profiler (CUPTI records every
kernel of the process, JAX's included), so it needs torch on the GPU machine.

    python3 tools/call_timeline.py mla_fp8_h16_b128_ctx4k [--plan] [--calls 40]

Prints one line per kernel (or memcpy / memset) position in a call: name, mean duration (us), mean
gap before it (us), then the mean span of a call (first kernel start to the next call's first
kernel start). Session 25 measured with it where an MLA call's time goes (NOTES item 46 b).
"""

import argparse
import collections
import sys

import jax

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/bench")
import profile_one  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--plan", action="store_true")
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    for name in args.configs:
        fn, operands, _ = profile_one.op_and_args(name, args.plan)
        for _ in range(5):
            jax.block_until_ready(fn(*operands))
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            outs = [fn(*operands) for _ in range(args.calls)]
            jax.block_until_ready(outs)
            torch.cuda.synchronize()
        events = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                        key=lambda e: e.time_range.start)
        # (memcpy / memset activity too: anything XLA puts between the kernels shows as its own line)
        kernels = list(events)
        if not kernels:
            print(name, ": no GPU events recorded")
            continue
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
        print(f"== {name}{' (plan)' if args.plan else ''}: {len(calls)} calls")
        for k in sorted(names):
            print(f"  {names[k][:70]:70s} {mean(dur[k]):8.1f} us  (gap before {mean(gap[k]):5.1f})")
        print(f"  gap to the next call {mean(gap[max(names) + 1]):5.1f} us; call span {mean(spans):8.1f} us")


if __name__ == "__main__":
    main()
