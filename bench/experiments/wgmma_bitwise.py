"""Outputs of the 16-bit MLA kernel (the wgmma kernel: sm90/kernel.cuh, its epilogue sm90/epilogue.cuh)
saved, or compared bit for bit with a saved run: for variants that must not change any result (e.g.
2026-12-08_mla_bf16_epilogue_compact.patch: the same sums, factors and products, stored from other
code), every output and lse must equal the base build's, word for word (-0 and NaN payloads count).

Dense: bfloat16 and float16 caches, combined (576-wide rows) and split (ckv + kpe), pages of 64
(the TMA loader) and 16 (the gathering loader); Hq 128 and 16, s_q 1 and s_q 2 causal; a batch of
mixed lengths (one sequence long enough for the schedule to cut it, empty and one-key sequences,
tile edges + 1, a bad page id, a NaN in a used latent value and one in a used rope value, NaN in
every row no sequence owns) and a uniform one (whole sequences, as the bench's). Sparse lists
(mla_decode_sparse) over a bfloat16 cache with NaN rows, junk and negative indices, empty lists.
The same epilogue's other instances: an fp8 cache in pages of 16 (bfloat16 queries converted to
half, and float16 queries) and 656-byte rows read as bfloat16 in pages of 16 (the split schedule).

    PYTHONPATH=/tmp/ab_base python3 -P bench/experiments/wgmma_bitwise.py save /tmp/base.npz
    PYTHONPATH=/tmp/ab_new python3 -P bench/experiments/wgmma_bitwise.py compare /tmp/base.npz

On a GPU each call prints how many of its sequences the schedule cut (from a plan), so the run
shows that both epilogue branches ran; elsewhere the script only exercises itself.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np


def _cut_count(plan, batch, rows):
    """Sequences of a Hopper plan with more than one piece (None off the GPU or unknown SM count):
    the schedule words are MlaSchedule::at(plan, parts, batch), seq_pieces last (workspace.h)."""
    import jax

    sms = getattr(jax.devices()[0], "core_count", None)
    if jax.default_backend() != "gpu" or not sms:
        return None
    parts = max(1, min(int(sms), 160) // -(-rows // 64))  # mla_num_partitions
    words = np.asarray(plan.schedule)
    pieces = words[2 + 2 * parts + 2 * batch: 2 + 2 * parts + 3 * batch]
    return int(np.sum(pieces > 1))


def outputs():
    import jax
    import jax.numpy as jnp

    import jaxpaged
    from jaxpaged import _fp8, _inputs

    rng = np.random.default_rng(61)
    res = {}

    def record(name, out, lse, note=""):
        o = np.asarray(out)
        res[name + " out"] = o.view(np.uint16).astype(np.uint32) if o.dtype.itemsize == 2 else o.view(np.uint32)
        res[name + " lse"] = np.asarray(lse).view(np.uint32)
        print(f"{name}{note}", flush=True)

    def dense_cache(lens, page, *, bad=None, nans=()):
        """(float32 cache [pages, page, 576], table): poisoned unowned rows; bad = (seq, entry) set
        out of range; nans: (seq, token, column) made NaN."""
        table, num_pages, used = _inputs.page_pool(rng, lens, page, spare_pages=2, spare_entries=1,
                                                   junk_ids=[-1, 1 << 30])
        cache = rng.standard_normal((num_pages, page, 576), np.float32)
        cache = _inputs.poison(cache, used, lens, table, page, slot_axis=1)
        for s, t, c in nans:
            cache[table[s, t // page], t % page, c] = np.nan
        if bad is not None:
            table[bad] = num_pages + 5
        return cache, table

    def dense(tag, lens, configs, page, dtypes=("bfloat16", "float16"), layouts=("combined", "split"),
              fmt="16bit", **spots):
        lens = np.asarray(lens, np.int32)
        cache, table = dense_cache(lens, page, **spots)
        for dtype in dtypes:
            for layout in layouts:
                if fmt == "fp8":
                    ckv, kpe, kw = _fp8.quantize(jnp.asarray(cache), 0.02, jnp.float8_e4m3fn), None, dict(kv_scale=0.02)
                elif fmt == "656":
                    c16 = jnp.asarray(cache, jnp.bfloat16)
                    ckv, kpe, kw = _fp8.pack_ds_rows(c16[..., :512], c16[..., 512:]), None, dict(ds_dequant="bfloat16")
                elif layout == "combined":
                    ckv, kpe, kw = jnp.asarray(cache, dtype), None, {}
                else:
                    ckv, kpe, kw = jnp.asarray(cache[..., :512], dtype), jnp.asarray(cache[..., 512:], dtype), {}
                for heads, s_q, causal in configs:
                    qn = jnp.asarray(rng.standard_normal((len(lens), s_q, heads, 512)), dtype)
                    qp = jnp.asarray(rng.standard_normal((len(lens), s_q, heads, 64)), dtype)
                    f = jax.jit(functools.partial(jaxpaged.mla_decode, scale=0.07, causal=causal, **kw))
                    out, lse = f(qn, qp, ckv, kpe, jnp.asarray(lens), jnp.asarray(table))
                    plan = jaxpaged.mla_decode_plan(jnp.asarray(lens), jnp.asarray(table), num_heads=heads,
                                                    page_size=page, s_q=s_q)
                    cut = _cut_count(plan, len(lens), s_q * heads)
                    record(f"{tag} {fmt} {dtype} {layout} page{page} h{heads} sq{s_q}", out, lse,
                           "" if cut is None else f"  ({cut} of {len(lens)} sequences cut)")

    full = [(128, 1, False), (16, 1, False), (16, 2, True), (128, 2, True)]
    small = [(128, 1, False), (16, 2, True)]
    # Mixed lengths (on an H100 the schedule cuts the longer ones into pieces, the shortest stay
    # whole): 0 empty; 1 leaves s_q 2's first row no key; 4097 and 129 end one key into a tile (a
    # causal row may see no key of the last piece). Sequence 7 has a bad page id. NaN in the
    # latent of sequence 2's only key and of sequence 8's last: s_q 2's first row does not see it,
    # but its products take 0 x NaN (a row or piece without keys must come out 0, the epilogue's
    # keep rule); NaN in the rope of sequence 3's token 1500 (a NaN score: its rows' sums NaN).
    mixed = [6000, 63, 1, 2000, 700, 0, 129, 3000, 4097, 64]
    spots = dict(bad=(7, 3), nans=[(2, 0, 7), (8, 4096, 7), (3, 1500, 512 + 3)])
    for page in (64, 16):
        dense("mixed", mixed, full, page, **spots)
        # Uniform batches of about a partition's count of sequences: whole (the schedule's rule for
        # equal lengths), as the bench's B = 64 configs; 511 ends one key short of a tile.
        dense("uniform b64", [511] * 64, [(128, 1, False)], page, layouts=("combined",))
        dense("uniform b128", [320] * 128, [(16, 2, True)], page, layouts=("combined",))
    # The epilogue's other formats (pages of 16: the gathering kernel's kMlaFp8 and kMlaDsRows).
    dense("mixed", mixed, small, 16, dtypes=("bfloat16", "float16"), layouts=("combined",), fmt="fp8", **spots)
    dense("mixed", mixed, small, 16, dtypes=("bfloat16",), layouts=("combined",), fmt="656", **spots)

    # Sparse lists over a bfloat16 pool (its page axis is the token pool); a few pool rows NaN.
    page, pages = 64, 256
    pool = rng.standard_normal((pages, page, 576), np.float32)
    pool[rng.integers(0, pages, 3), rng.integers(0, page, 3), rng.integers(0, 576, 3)] = np.nan
    ckv = jnp.asarray(pool, jnp.bfloat16)
    for heads, batch, s_q, topk in [(128, 8, 1, 2048), (16, 16, 2, 512)]:
        qn = jnp.asarray(rng.standard_normal((batch, s_q, heads, 512)), jnp.bfloat16)
        qp = jnp.asarray(rng.standard_normal((batch, s_q, heads, 64)), jnp.bfloat16)
        idx = rng.integers(-64, pages * page + 64, (batch, s_q, topk)).astype(np.int32)  # (outside: no key)
        lens = jnp.asarray((97 * np.arange(batch)) % (topk + 1), jnp.int32)  # (0 .. topk: an empty list)
        f = jax.jit(functools.partial(jaxpaged.mla_decode_sparse, scale=0.07, topk_lens=lens))
        out, lse = f(qn, qp, ckv, None, jnp.asarray(idx))
        record(f"sparse bfloat16 h{heads} b{batch} sq{s_q} top{topk}", out, lse)
    return res


def main():
    """The save / compare of narrow_bitwise.py over this file's outputs."""
    spec = importlib.util.spec_from_file_location("narrow_bitwise", os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "narrow_bitwise.py"))
    narrow = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(narrow)
    narrow.main(outputs)


if __name__ == "__main__":
    main()
