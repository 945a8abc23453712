"""Repeated calls of the narrow fp8 MLA kernel (JAXPAGED_MLA_FP8_NARROW=1, set here before the
extension's first call; the default since session 24), the check that its early intermittent
launch failure (NOTES item 44 d, fixed) stays away after a kernel change: 151 back-to-back calls
per config, then whether the last output equals the first.

    python3 -P tools/mla_fp8_narrow_stress.py [calls]

On a launch failure the CUDA context is lost: the config that failed is the last one printed. For
the cause, run the same under compute-sanitizer (memcheck, then racecheck / synccheck) with fewer
calls, or the sanitizer driver's narrow cases in a loop (tools/sanitize_driver.cu).
"""

import functools
import os
import sys
import time

os.environ["JAXPAGED_MLA_FP8_NARROW"] = "1"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxpaged  # noqa: E402
from jaxpaged import _fp8, _inputs  # noqa: E402

CONFIGS = [  # (name, heads, s_q, page, kv_lens)
    ("b128 ctx 4K (the bench's)", 16, 1, 64, [4096] * 128),
    ("mixed lengths", 16, 1, 64, [0, 1000, 4100, 63]),
    ("b32 ctx 8K page 128", 16, 1, 128, [8192] * 32),
    ("h8 s_q 2 causal", 8, 2, 64, [1, 65, 700, 3000]),
]


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 150
    for name, heads, s_q, page, lens in CONFIGS:
        rng = np.random.default_rng(1)
        q_nope, q_pe, ckv, _, kv_lens, table = _inputs.mla_inputs(
            rng, kv_lens=lens, s_q=s_q, num_heads=heads, page_size=page, dtype="bfloat16", combined=True,
            spare_pages=2, on_device=True)
        ckv8 = _fp8.quantize(ckv, 0.02, jnp.float8_e4m3fn)
        f = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, causal=s_q > 1, kv_scale=0.02))
        args = (q_nope, q_pe, ckv8, None, kv_lens, table)
        print(f"{name}: ...", flush=True)
        first = np.asarray(f(*args)[0], np.float32)
        t0 = time.perf_counter()
        for _ in range(calls):
            out = f(*args)
        last = np.asarray(jax.block_until_ready(out)[0], np.float32)
        same = np.array_equal(np.isnan(first), np.isnan(last)) and np.array_equal(np.nan_to_num(first), np.nan_to_num(last))
        print(f"{name}: {calls + 1} calls ok, {(time.perf_counter() - t0) / calls * 1e3:.3f} ms per call, "
              f"last output == first: {same}", flush=True)


if __name__ == "__main__":
    main()
