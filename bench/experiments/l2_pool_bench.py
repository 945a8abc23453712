"""NOTES item 54 e-f: the bench's MLA configs with the block table folded onto a pool of POOL
distinct pages (default 128 = 9 MB of 64-token pages: every tile an L2 hit), ours beside FlashMLA,
per call and per layer, output checked against the reference as in the bench. Same shapes and
FLOPs as the bench's configs; "% BW" is then meaningless (the bytes come from L2).

    PYTHONPATH=... python bench/experiments/l2_pool_bench.py [--pool 128] CONFIG...
"""
import argparse
import sys
import time

import jax.numpy as jnp
import numpy as np

sys.path.insert(0, __file__.rsplit("/", 3)[0] + "/bench")
import bench  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--pool", type=int, default=128)
parser.add_argument("configs", nargs="+")
a = parser.parse_args()
plain = bench.mla_inputs


def pooled(cfg, rng):
    args, kv_bytes, flops = plain(cfg, rng)
    if cfg.topk:
        return args, kv_bytes, flops
    *rest, table = args
    return (*rest, jnp.asarray(np.asarray(table) % a.pool, dtype=table.dtype)), kv_bytes, flops


bench.mla_inputs = pooled
copy = bench.copy_bandwidth_GBps()
for name in a.configs:
    cfg = next(c for c in bench.CONFIGS if c.name == name)
    t0 = time.perf_counter()
    rec = bench.run_config(cfg, np.random.default_rng(sum(map(ord, name))), copy)
    print(f"{name} pool {a.pool}: ours {rec['ours_ms']:.4f} ms (plan {rec.get('ours_plan_ms', 0):.4f}), "
          f"step {rec.get('ours_step_us', 0):.1f} us/layer; flashmla {rec.get('flashmla_ms', 0):.4f} ms, "
          f"step {rec.get('flashmla_step_us', 0):.1f} us/layer; {rec['tflops']:.1f} TF/s; "
          f"err {rec['rel_err']:.1e} / {rec.get('flashmla_rel_err', float('nan')):.1e} "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
