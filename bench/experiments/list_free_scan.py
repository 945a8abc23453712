"""Per-call time of pure paged decode over several waves, for NOTES item 58's limit on the list-free
path (kListFreeSeqs): run once with JAXPAGED_LIST_FREE_SEQS=1 (the tile list, any S > 1) and once
with =1024 (the blocks' own search up to 1024 sequences), same build
(2026-11-28_paged_list_free_limit_env.patch). Hq 32, Hkv 8, D 128, pages of 16; per S, varied
lengths (16-512: short blocks, where the search costs most) and equal ones (256).

    JAXPAGED_LIST_FREE_SEQS=1024 python bench/experiments/list_free_scan.py
"""

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np

import jaxpaged
from jaxpaged import _fp8, _inputs
from jaxpaged._timing import device_ms

limit = os.environ.get("JAXPAGED_LIST_FREE_SEQS", "default")
for fp8 in (False, True):
    for S in (128, 256, 384, 512, 768, 1024):
        for kind in ("varied", "equal"):
            rng = np.random.default_rng(S)
            kv_lens = list(rng.integers(16, 513, size=S)) if kind == "varied" else [256] * S
            q, k, v, lens, table, _ = _inputs.paged_inputs(
                rng, q_lens=[1] * S, kv_lens=kv_lens, num_q_heads=32, num_kv_heads=8, head_dim=128,
                page_size=16, dtype="bfloat16", decode=True, on_device=True)
            opts = {}
            if fp8:
                k, v = _fp8.quantize(k, 0.05, jnp.float8_e4m3fn), _fp8.quantize(v, 0.05, jnp.float8_e4m3fn)
                opts = dict(k_scale=0.05, v_scale=0.05)
            f = jax.jit(functools.partial(jaxpaged.paged_attention, **opts))
            ms = device_ms(f, q, k, v, lens, table)
            print(f"list_free_limit={limit} {'fp8' if fp8 else 'bf16'} S={S} {kind}: {ms * 1e3:.1f} us", flush=True)
