"""Per-call fixed cost of an op, apart from its main kernel's streaming time.

    python bench/overhead.py [config ...]

For each config: the time per call of a 10-call burst (fixed part included: the first dispatch's
latency and the final sync) against the steady-state time the bench reports, and the same for a
trivial jitted function (one tiny kernel: the host's dispatch rate for an XLA executable).
"""

import sys

import jax
import jax.numpy as jnp

from jaxpaged._timing import burst_ms, device_ms

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from profile_one import op_and_args  # noqa: E402


def main(names):
    null = jax.jit(lambda x: x + 1)
    x = jnp.zeros((8,), jnp.float32)
    print(f"{'what':40s} {'10-call burst':>14s} {'steady state':>14s}  (ms per call)")
    print(f"{'trivial jit (x + 1)':40s} {burst_ms(null, x):14.4f} {device_ms(null, x):14.4f}")
    for name in names:
        fn, args = op_and_args(name)
        print(f"{name:40s} {burst_ms(fn, *args):14.4f} {device_ms(fn, *args):14.4f}")


if __name__ == "__main__":
    main(sys.argv[1:])
