"""Timing helpers shared by the main job and the benchmark."""

from __future__ import annotations

import time

import jax
import numpy as np


def median_ms(fn, *args, warmup: int = 3, iters: int = 20) -> float:
    """Median wall time of fn(*args) in ms, each call synchronised (block_until_ready).

    Under jit, one call is one dispatch of a compiled executable, so on a GPU this measures
    device time plus a small, fixed launch overhead.
    """
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))
