"""Runs the ops under jit on meshes of 4 CPU devices (2 x 2 and 1 x 4) and checks them against the
reference.

Run by tests/test_sharding.py in its own process: the device count must be set before JAX starts.
Each case prints one line; any failure raises. For each case it also checks which collectives the
compiled program holds: the shardings the ops support must need none.
"""

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import jaxpaged  # noqa: E402
from jaxpaged import reference  # noqa: E402

COLLECTIVES = ("all-gather", "all-reduce", "all-to-all", "collective-permute", "reduce-scatter")
mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("dp", "tp"))
wide_tp = Mesh(np.array(jax.devices()[:4]).reshape(1, 4), ("dp", "tp"))
rng = np.random.default_rng(0)


def put(x, *spec, on=mesh):
    return jax.device_put(x, NamedSharding(on, P(*spec)))


def check(name, fn, ref_fn, args, specs, want_out_spec, no_collectives=True, on=mesh):
    placed = [None if a is None else (a if s is None else put(a, *s, on=on)) for a, s in zip(args, specs)]
    f = jax.jit(fn)
    hlo = f.lower(*placed).compile().as_text()
    found = [c for c in COLLECTIVES if c in hlo]
    out, lse = f(*placed)
    ref_out, ref_lse = ref_fn(*args)
    err = max(float(jnp.abs(out - ref_out).max()), float(jnp.abs(lse - ref_lse).max()))
    spec = tuple(out.sharding.spec)
    print(f"{name}: max err {err:.1e}, out spec {spec}, collectives {found}")
    assert err < 1e-4, (name, err)
    if want_out_spec is not None:
        assert spec[:len(want_out_spec)] == want_out_spec, (name, spec)
    if no_collectives:
        assert not found, (name, found)


def paged_inputs(layout, q_lens=None):
    """4 sequences; Hq = 8 query heads over Hkv = 2 KV heads (groups of 4), head dim 64, 16-token pages."""
    num_seqs, pages, page, hkv, hq, d = 4, 64, 16, 2, 8, 64
    shape = (pages, page, hkv, d) if layout == "NHD" else (pages, hkv, page, d)
    k = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    v = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    tokens = num_seqs if q_lens is None else sum(q_lens)
    q = jnp.asarray(rng.standard_normal((tokens, hq, d)), jnp.float32)
    lens = jnp.asarray(rng.integers(20, 120, num_seqs), jnp.int32)
    table = jnp.asarray(rng.permutation(pages)[:num_seqs * 8].reshape(num_seqs, 8), jnp.int32)
    return q, k, v, lens, table


def paged_cases():
    for layout, kv_dim in (("NHD", 2), ("HND", 1)):
        q, k, v, lens, table = paged_inputs(layout)
        cache = [None] * 4
        cache[kv_dim] = "tp"

        def op(*a, layout=layout):
            return jaxpaged.paged_attention(*a, kv_layout=layout, return_lse=True)

        def ref(*a, layout=layout):
            return reference.paged_attention(*a, kv_layout=layout, return_lse=True)
        check(f"paged decode {layout}, sequences on dp, heads on tp", op, ref, (q, k, v, lens, table),
              [("dp", "tp", None), cache, cache, ("dp",), ("dp", None)], ("dp", "tp"))

    # A split that does not divide: 4-way tp over 2 KV heads (q's 8 heads do split 4 ways, but not
    # in whole GQA groups). The op then computes the heads whole (gathering q), still exactly.
    q, k, v, lens, table = paged_inputs("NHD")

    def op(*a):
        return jaxpaged.paged_attention(*a, return_lse=True)

    def ref(*a):
        return reference.paged_attention(*a, return_lse=True)
    check("paged decode, 4-way tp over 2 KV heads", op, ref, (q, k, v, lens, table),
          [(None, "tp", None), None, None, None, None], None, no_collectives=False, on=wide_tp)

    # Ragged (prefill chunks + decode): heads split; tokens stay whole.
    q_lens = [5, 1, 3, 1]
    q, k, v, lens, table = paged_inputs("NHD", q_lens=q_lens)
    lens = jnp.maximum(lens, jnp.asarray(q_lens, jnp.int32))
    cu = jnp.asarray(np.concatenate([[0], np.cumsum(q_lens)]), jnp.int32)

    def ragged(*a):
        return jaxpaged.paged_attention(*a, return_lse=True, sliding_window=40)

    def ragged_ref(*a):
        return reference.paged_attention(*a, return_lse=True, sliding_window=40)
    cache = (None, None, "tp", None)
    check("paged ragged, heads on tp", ragged, ragged_ref, (q, k, v, lens, table, cu),
          [(None, "tp", None), cache, cache, (None,), (None, None), (None,)], (None, "tp"))
    # Tokens of a ragged call sharded by the caller: gathered first (correct, with collectives).
    check("paged ragged, tokens on dp (gathered)", ragged, ragged_ref, (q, k, v, lens, table, cu),
          [("dp", "tp", None), cache, cache, (None,), (None, None), (None,)], None, no_collectives=False)


def mla_cases():
    batch, heads, pages, page = 4, 16, 16, 16
    lens = jnp.asarray(rng.integers(30, 200, batch), jnp.int32)
    table = jnp.asarray(rng.permutation(pages)[:batch * 4].reshape(batch, 4), jnp.int32)
    q_nope = jnp.asarray(rng.standard_normal((batch, 2, heads, 512)), jnp.float32)
    q_pe = jnp.asarray(rng.standard_normal((batch, 2, heads, 64)), jnp.float32)
    cache = jnp.asarray(rng.standard_normal((pages, page, 576)), jnp.float32) * 0.1
    q_spec = ("dp", None, "tp", None)

    def op(*a):
        return jaxpaged.mla_decode(*a, scale=0.05, causal=True)

    def ref(*a):
        return reference.mla_decode(*a, scale=0.05, causal=True)
    check("mla combined cache, sequences on dp, heads on tp", op, ref,
          (q_nope, q_pe, cache, None, lens, table),
          [q_spec, q_spec, (None, None, None), None, ("dp",), ("dp", None)], ("dp", None, "tp"))
    check("mla split caches, sequences on dp, heads on tp", op, ref,
          (q_nope, q_pe, cache[..., :512], cache[..., 512:], lens, table),
          [q_spec, q_spec, (None, None, None), (None, None, None), ("dp",), ("dp", None)],
          ("dp", None, "tp"))


if __name__ == "__main__":
    paged_cases()
    mla_cases()
    print("all sharded cases match the reference")
