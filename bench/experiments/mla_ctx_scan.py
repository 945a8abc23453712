"""NOTES item 55: fixed cost per call against cost per token, ours beside FlashMLA. Runs the bench's
run_config (ours, ours with a plan, per layer; FlashMLA per call and per layer, outputs checked) on
mla_h128_b{B}_ctx{L} for a few context lengths and fits time = a + b * L per column: a is what a
call costs whatever its length (prologue, epilogue, merge, launch), b the steady state.

    PYTHONPATH=... python bench/experiments/mla_ctx_scan.py [--batch 64] [--ctx 1024 2048 4096 8192]
"""
import argparse
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 3)[0] + "/bench")
import bench  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--ctx", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
a = parser.parse_args()
copy = bench.copy_bandwidth_GBps()
cols = {"ours_plan_ms": "ours ms (plan)", "flashmla_ms": "FlashMLA ms",
        "ours_step_us": "ours us/layer", "flashmla_step_us": "FlashMLA us/layer"}
rows = []
for ctx in a.ctx:
    cfg = bench.Mla(f"mla_h128_b{a.batch}_ctx{ctx}", batch=a.batch, ctx=ctx)
    rec = bench.run_config(cfg, np.random.default_rng(ctx), copy)
    rows.append(rec)
    print(f"{cfg.name}: " + ", ".join(f"{v} {rec.get(k, float('nan')):.4g}" for k, v in cols.items())
          + f"; err {rec['rel_err']:.1e} / {rec.get('flashmla_rel_err', float('nan')):.1e}", flush=True)
x = np.array(a.ctx, dtype=float)
print(f"\nfit over ctx {a.ctx} (B={a.batch}, h128): time = a + b * ctx")
for k, v in cols.items():
    y = np.array([r.get(k, np.nan) for r in rows], dtype=float)
    if np.isnan(y).any():
        continue
    b, a0 = np.polyfit(x, y, 1)
    resid = np.max(np.abs(y - (a0 + b * x)))
    unit = "ms" if k.endswith("_ms") else "us"
    print(f"  {v:20s} a = {a0:8.4f} {unit}, b = {b * 1024:8.5f} {unit} per 1K tokens (max resid {resid:.4f})")
