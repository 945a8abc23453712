"""Timing helpers shared by the main job (median_ms) and the benchmark (device_ms, burst_ms)."""

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


def _burst_s(fn, args, calls: int) -> tuple[float, float]:
    """Seconds for `calls` back-to-back dispatches then one sync, and for the dispatches alone."""
    start = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    dispatched = time.perf_counter()
    jax.block_until_ready(out)
    return time.perf_counter() - start, dispatched - start


def device_ms(fn, *args, calls: int = 10, reps: int = 9, stats: dict | None = None) -> float:
    """Steady-state time per call in ms, as in a serving loop that keeps the GPU fed.

    A burst of n back-to-back calls then one sync costs n x (time per call) plus a fixed part: the
    first call's dispatch latency before the GPU starts, and the final sync (about 0.3 ms on the
    H100 machine, i.e. 30 us per call in a 10-call burst). So each sample times a burst of `calls`
    and one of 4 x `calls`, and takes the difference over the 3 x `calls` extra calls; the median
    over reps rejects outliers. If dispatching alone takes as long as the GPU work (a tiny op), the
    result is the host's dispatch rate, and a warning says so.

    `stats`, if given, receives two diagnostics of the same bursts: `dispatch_ms`, the median host
    time to dispatch one call of the long burst (near the result, the result is the host's), and
    `min_diff_ms`, the difference of the long and short bursts' minima over the reps per extra call
    (each minimum drops its own burst's hiccups, where the median of differences needs most
    samples clean).
    """
    for _ in range(3):
        jax.block_until_ready(fn(*args))
    samples, host_bound, shorts, longs, dispatches = [], 0, [], [], []
    for _ in range(reps):
        short, _ = _burst_s(fn, args, calls)
        long, dispatch = _burst_s(fn, args, 4 * calls)
        per_call = (long - short) / (3 * calls)
        host_bound += dispatch / (4 * calls) > 0.9 * per_call
        samples.append(per_call * 1e3)
        shorts.append(short)
        longs.append(long)
        dispatches.append(dispatch / (4 * calls) * 1e3)
    if host_bound > reps // 2:
        print(f"  warning: {getattr(fn, '__name__', 'fn')}: host dispatch is as slow as the GPU work; "
              "the time is the dispatch rate")
    if stats is not None:
        stats["dispatch_ms"] = float(np.median(dispatches))
        stats["min_diff_ms"] = (min(longs) - min(shorts)) / (3 * calls) * 1e3
    return float(np.median(samples))


def burst_ms(fn, *args, calls: int = 10, reps: int = 9) -> float:
    """The pre-session-5 measure: median of (10 back-to-back calls + sync) / 10, fixed part included."""
    return float(np.median([_burst_s(fn, args, calls)[0] * 1e3 / calls for _ in range(reps)]))
