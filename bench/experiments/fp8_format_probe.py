"""Session 31 (NOTES item 52 c): is fp8 paged decode_b64_ctx4k's 78% of copy bandwidth (against
decode_fp8_b8_ctx32k's 90%, same bytes and tensor-core work) its fp8 format (e4m3 there, e5m2 in
b8) or its shape? Both configs in both formats, ours only, per call and per layer, one process.

    python bench/experiments/fp8_format_probe.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bench  # noqa: E402

CONFIGS = [
    bench.Paged("fp8_b64_ctx4k_e4m3", kv_dtype="float8_e4m3fn"),
    bench.Paged("fp8_b64_ctx4k_e5m2", kv_dtype="float8_e5m2"),
    bench.Paged("fp8_b8_ctx32k_e4m3", batch=8, ctx=32768, kv_dtype="float8_e4m3fn"),
    bench.Paged("fp8_b8_ctx32k_e5m2", batch=8, ctx=32768, kv_dtype="float8_e5m2"),
    bench.Paged("fp8_h64_b32_ctx8k_e5m2", hq=64, batch=32, ctx=8192, kv_dtype="float8_e5m2"),
]

copy = bench.copy_bandwidth_GBps()
for cfg in CONFIGS:
    rec = bench.run_config(cfg, np.random.default_rng(sum(map(ord, cfg.name))), copy, ours_only=True, ours_step=True)
    print(f"{cfg.name:<26} {rec['ours_ms']:.3f} ms  step {rec['ours_step_us']:.1f} us  {rec['pct_of_copy_bw']:.1f}% BW",
          flush=True)
