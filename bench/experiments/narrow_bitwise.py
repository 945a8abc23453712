"""Outputs of the narrow fp8 MLA kernel saved, or compared bit for bit with a saved run: for variants
that change only the order of its instructions, not of its sums (e.g. S^T's partial accumulators in
flight), every output and lse must be bitwise equal to the base build's.

    PYTHONPATH=/tmp/ab_base python3 -P bench/experiments/narrow_bitwise.py save /tmp/base.npz
    PYTHONPATH=/tmp/ab_new python3 -P bench/experiments/narrow_bitwise.py compare /tmp/base.npz

The cases are tools/mla_fp8_narrow_check.py's (tails, page 128, s_q 2 causal, e5m2, scaled queries,
junk table entries, poisoned pages) plus a plan and a split sequence.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys

import numpy as np


def outputs():
    import jax
    import jax.numpy as jnp

    import jaxpaged

    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("check", os.path.join(here, "..", "..", "tools", "mla_fp8_narrow_check.py"))
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    cases = check.cases() + [("h16 b2 32K", 16, 1, 64, False, [32768, 12345], 1.0, "e4m3")]
    res = {}
    for case in cases:
        name, causal = case[0], case[4]
        f = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, causal=causal, kv_scale=0.02))
        out, lse = f(*check.case_args(case))
        res[name + " out"] = np.asarray(out.astype(jnp.float32))
        res[name + " lse"] = np.asarray(lse)
    return res


def main(outputs_fn=None):
    """save / compare (argv) the arrays of outputs_fn() (default: this file's cases; wide_bitwise.py
    passes its own)."""
    mode, path = sys.argv[1], sys.argv[2]
    res = (outputs_fn or outputs)()
    if mode == "save":
        np.savez(path, **res)
        print(f"saved {len(res)} arrays")
        return
    base = np.load(path)
    bad = [k for k in res if not np.array_equal(res[k].view(np.uint32), base[k].view(np.uint32))]
    print(f"bitwise: {len(res) - len(bad)} of {len(res)} arrays equal" + (f"; differ: {bad}" if bad else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
