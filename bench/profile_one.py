"""Runs one bench config's op a few times, for a profiler (ncu / nsys) to capture.

    ncu -k regex:mla_wgmma -c 1 --section SpeedOfLight python bench/profile_one.py mla_h128_b64_ctx4k
"""

import functools
import math
import sys

import jax
import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bench  # noqa: E402
import jaxpaged  # noqa: E402


def op_and_args(name: str):
    """The jitted op of bench config `name` and its inputs (the bench's data, seed 0)."""
    cfg = next(c for c in bench.CONFIGS if c.name == name)
    rng = np.random.default_rng(0)
    if isinstance(cfg, bench.Paged):
        args, _, _ = bench.paged_inputs(cfg, rng)
        fn = jax.jit(functools.partial(jaxpaged.paged_attention, soft_cap=cfg.soft_cap,
                                       sliding_window=cfg.window))
    else:
        args, _, _ = bench.mla_inputs(cfg, rng)
        fn = jax.jit(lambda *a: jaxpaged.mla_decode(*a, scale=1.0 / math.sqrt(192.0), causal=cfg.causal))
    return fn, args


def main(name: str, calls: int = 3):
    fn, args = op_and_args(name)
    for _ in range(calls):
        jax.block_until_ready(fn(*args))


if __name__ == "__main__":
    main(sys.argv[1])
