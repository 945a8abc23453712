"""Runs the ops under jit on device meshes and checks them against the reference.

Two ways to run it:
  * CPU (default; tests/test_sharding.py runs it in its own process, since the device count must be
    set before JAX starts): 4 forced host devices, meshes 2 x 2 and 1 x 4, float32.
  * GPU (`python tests/sharded_cases.py gpu` on a machine with 2 or more GPUs): the real devices,
    meshes (n/2) x 2 - or 1 x 2 and 2 x 1 on two GPUs - and bfloat16 (what the GPU kernels take),
    with the tolerance of tests/cases.py for it.
Each case prints one line; any failure raises. For each case it also checks which collectives the
compiled program holds: the shardings the ops support must need none.
"""

import functools
import os
import sys

ON_GPU = len(sys.argv) > 1 and sys.argv[1] == "gpu"
if not ON_GPU:
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import jaxpaged  # noqa: E402
from jaxpaged import _fp8, reference  # noqa: E402

COLLECTIVES = ("all-gather", "all-reduce", "all-to-all", "collective-permute", "reduce-scatter")
DTYPE = jnp.bfloat16 if ON_GPU else jnp.float32
TOL = 2e-2 if ON_GPU else 1e-4  # bf16 output (tests/cases.py's TOLERANCE), lse in float32 math
devices = np.array(jax.devices("gpu" if ON_GPU else "cpu"))
rng = np.random.default_rng(0)


def meshes():
    """The (dp, tp) meshes the main cases run on."""
    n = len(devices)
    if not ON_GPU:
        return [Mesh(devices[:4].reshape(2, 2), ("dp", "tp"))]
    assert n >= 2, "the GPU run needs 2 or more GPUs"
    if n >= 4:
        return [Mesh(devices[: n // 2 * 2].reshape(n // 2, 2), ("dp", "tp"))]
    return [Mesh(devices[:2].reshape(1, 2), ("dp", "tp")), Mesh(devices[:2].reshape(2, 1), ("dp", "tp"))]


def put(x, spec, on):
    return jax.device_put(x, NamedSharding(on, P(*spec)))


def live_axes(spec, on):
    """`spec` with the mesh axes of size 1 dropped (they shard nothing)."""
    return tuple(a if a is not None and on.shape[a] > 1 else None for a in spec)


def check(name, fn, ref_fn, args, specs, want_out_spec, on, no_collectives=True):
    args = [a if a is None or a.dtype in (jnp.int32, jnp.uint8) or _fp8.is_fp8(a.dtype) else a.astype(DTYPE)
            for a in args]
    placed = [None if a is None else (a if s is None else put(a, s, on)) for a, s in zip(args, specs)]
    f = jax.jit(fn)
    hlo = f.lower(*placed).compile().as_text()
    found = [c for c in COLLECTIVES if c in hlo]
    out, lse = f(*placed)
    ref_out, ref_lse = ref_fn(*args)
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    err = max(float(jnp.abs(f32(out) - f32(ref_out)).max()), float(jnp.abs(lse - ref_lse).max()))
    spec = tuple(out.sharding.spec)
    print(f"{name} on mesh {dict(on.shape)}: max err {err:.1e}, out spec {spec}, collectives {found}")
    assert err < TOL, (name, err)
    if want_out_spec is not None:
        got = live_axes(spec[: len(want_out_spec)] + (None,) * (len(want_out_spec) - len(spec)), on)
        assert got == live_axes(want_out_spec, on), (name, spec)
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


def paged_cases(mesh):
    for layout, kv_dim in (("NHD", 2), ("HND", 1)):
        q, k, v, lens, table = paged_inputs(layout)
        cache = [None] * 4
        cache[kv_dim] = "tp"

        def op(*a, layout=layout):
            return jaxpaged.paged_attention(*a, kv_layout=layout, return_lse=True)

        def ref(*a, layout=layout):
            return reference.paged_attention(*a, kv_layout=layout, return_lse=True)
        check(f"paged decode {layout}, sequences on dp, heads on tp", op, ref, (q, k, v, lens, table),
              [("dp", "tp", None), cache, cache, ("dp",), ("dp", None)], ("dp", "tp"), mesh)

    q, k, v, lens, table = paged_inputs("NHD")

    def decode_plan(*a):  # sequences on dp: each device's call lists its own tiles
        plan = jaxpaged.paged_attention_plan(a[3], a[4], num_q_heads=8, num_kv_heads=2, page_size=16)
        return jaxpaged.paged_attention(*a, return_lse=True, plan=plan)
    # (the plan op reads kv_lens whole: S words all-gathered once per step)
    check("paged decode with a plan, sequences on dp, heads on tp", decode_plan,
          lambda *a: reference.paged_attention(*a, return_lse=True), (q, k, v, lens, table),
          [("dp", "tp", None), (None, None, "tp", None), (None, None, "tp", None), ("dp",), ("dp", None)],
          ("dp", "tp"), mesh, no_collectives=False)

    # Traced options (jit arguments) travel replicated with the sharded call.
    q, k, v, lens, table = paged_inputs("NHD")

    def traced(q, k, v, lens, table, cap, window, sinks):
        return jaxpaged.paged_attention(q, k, v, lens, table, soft_cap=cap, sliding_window=window,
                                        sinks=sinks, return_lse=True)

    def traced_ref(q, k, v, lens, table, cap, window, sinks):
        return reference.paged_attention(q, k, v, lens, table, soft_cap=float(cap), sliding_window=int(window),
                                         sinks=sinks, return_lse=True)
    cache = (None, None, "tp", None)
    sinks = jnp.asarray(rng.standard_normal(8), jnp.float32)
    check("paged decode, traced soft_cap and window, sinks", traced, traced_ref,
          (q, k, v, lens, table, jnp.float32(20.0), jnp.int32(30), sinks),
          [("dp", "tp", None), cache, cache, ("dp",), ("dp", None), None, None, ("tp",)], ("dp", "tp"), mesh)

    # fp8 caches (e4m3) with traced scales (replicated beside the sharded call).
    q, k, v, lens, table = paged_inputs("NHD")
    k8, v8 = _fp8.quantize(k, 0.05, jnp.float8_e4m3fn), _fp8.quantize(v, 0.02, jnp.float8_e4m3fn)

    def fp8_op(q, k, v, lens, table, ks, vs):
        return jaxpaged.paged_attention(q, k, v, lens, table, k_scale=ks, v_scale=vs, return_lse=True)

    def fp8_ref(q, k, v, lens, table, ks, vs):
        return reference.paged_attention(q, k, v, lens, table, k_scale=ks, v_scale=vs, return_lse=True)
    check("paged fp8 caches, traced scales, sequences on dp, heads on tp", fp8_op, fp8_ref,
          (q, k8, v8, lens, table, jnp.float32(0.05), jnp.float32(0.02)),
          [("dp", "tp", None), cache, cache, ("dp",), ("dp", None), None, None], ("dp", "tp"), mesh)

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
          [(None, "tp", None), cache, cache, (None,), (None, None), (None,)], (None, "tp"), mesh)
    def ragged_plan(*a):  # heads on tp: each device's call has the plan's rows, sequences and group
        plan = jaxpaged.paged_attention_plan(a[3], a[4], a[5], num_q_heads=8, num_kv_heads=2, page_size=16,
                                             num_tokens=a[0].shape[0])
        return jaxpaged.paged_attention(*a, return_lse=True, sliding_window=40, plan=plan)
    check("paged ragged with a plan, heads on tp", ragged_plan, ragged_ref, (q, k, v, lens, table, cu),
          [(None, "tp", None), cache, cache, (None,), (None, None), (None,)], (None, "tp"), mesh)
    # Tokens of a ragged call sharded by the caller: gathered first (correct, with collectives).
    check("paged ragged, tokens on dp (gathered)", ragged, ragged_ref, (q, k, v, lens, table, cu),
          [("dp", "tp", None), cache, cache, (None,), (None, None), (None,)], None, mesh,
          no_collectives=False)


def mla_cases(mesh):
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
          [q_spec, q_spec, (None, None, None), None, ("dp",), ("dp", None)], ("dp", None, "tp"), mesh)
    def with_plan(*a):  # the plan made for the whole batch; each device's call makes its own
        plan = jaxpaged.mla_decode_plan(a[4], a[5], num_heads=heads, page_size=page, s_q=2)
        return jaxpaged.mla_decode(*a, scale=0.05, causal=True, plan=plan)
    # (the plan op reads kv_lens whole: B words all-gathered once per step)
    check("mla combined cache with a plan, sequences on dp, heads on tp", with_plan, ref,
          (q_nope, q_pe, cache, None, lens, table),
          [q_spec, q_spec, (None, None, None), None, ("dp",), ("dp", None)], ("dp", None, "tp"), mesh,
          no_collectives=False)
    check("mla combined cache, traced scale", lambda *a: jaxpaged.mla_decode(*a[:6], scale=a[6]),
          lambda *a: reference.mla_decode(*a[:6], scale=float(a[6])),
          (q_nope, q_pe, cache, None, lens, table, jnp.float32(0.07)),
          [q_spec, q_spec, (None, None, None), None, ("dp",), ("dp", None), None], ("dp", None, "tp"), mesh)
    slots = jnp.asarray(rng.integers(-2, pages * page + 2, (batch, 2, 64)), jnp.int32)
    check("mla sparse, sequences on dp, heads on tp",
          lambda *a: jaxpaged.mla_decode_sparse(*a, scale=0.05, topk_lens=jnp.array([64, 5, 0, 33])),
          lambda *a: reference.mla_decode_sparse(*a, scale=0.05, topk_lens=jnp.array([64, 5, 0, 33])),
          (q_nope, q_pe, cache, None, slots),
          [q_spec, q_spec, (None, None, None), None, ("dp", None, None)], ("dp", None, "tp"), mesh)
    # Sparse lists over 656-byte rows (float16 reading) with sinks split with the heads, no topk_lens;
    # and over an e4m3 combined cache with kv_scale.
    sinks = jnp.asarray(rng.standard_normal(heads), jnp.float32)
    rows = _fp8.pack_ds_rows(cache[..., :512], cache[..., 512:])  # DeepSeek-V3.2's 656-byte rows
    check("mla sparse, 656-byte rows, sinks, sequences on dp, heads on tp",
          lambda *a: jaxpaged.mla_decode_sparse(*a[:5], scale=0.05, ds_dequant="float16", sinks=a[5]),
          lambda *a: reference.mla_decode_sparse(*a[:5], scale=0.05, ds_dequant="float16", sinks=a[5]),
          (q_nope, q_pe, rows, None, slots, sinks),
          [q_spec, q_spec, (None, None, None), None, ("dp", None, None), ("tp",)], ("dp", None, "tp"), mesh)
    check("mla sparse, fp8 cache, sequences on dp, heads on tp",
          lambda *a: jaxpaged.mla_decode_sparse(*a, scale=0.05, kv_scale=0.01),
          lambda *a: reference.mla_decode_sparse(*a, scale=0.05, kv_scale=0.01),
          (q_nope, q_pe, _fp8.quantize(cache, 0.01, jnp.float8_e4m3fn), None, slots),
          [q_spec, q_spec, (None, None, None), None, ("dp", None, None)], ("dp", None, "tp"), mesh)
    # An fp8 cache with fp8_math: a permission the CPU kernel does not use (it computes exactly), so
    # the reference's results; the option travels with the sharded call.
    fp8_cache = _fp8.quantize(cache, 0.01, jnp.float8_e4m3fn)
    check("mla fp8 cache, fp8_math, sequences on dp, heads on tp",
          lambda *a: jaxpaged.mla_decode(*a, scale=0.05, causal=True, kv_scale=0.01, fp8_math=True),
          lambda *a: reference.mla_decode(*a, scale=0.05, causal=True, kv_scale=0.01),
          (q_nope, q_pe, fp8_cache, None, lens, table),
          [q_spec, q_spec, (None, None, None), None, ("dp",), ("dp", None)], ("dp", None, "tp"), mesh)
    # The 656-byte rows read as float16 (the ds_read attribute travels with the call).
    check("mla 656-byte rows read as float16, sequences on dp, heads on tp",
          lambda *a: jaxpaged.mla_decode(*a, scale=0.05, causal=True, ds_dequant="float16"),
          lambda *a: reference.mla_decode(*a, scale=0.05, causal=True, ds_dequant="float16"),
          (q_nope, q_pe, rows, None, lens, table),
          [q_spec, q_spec, (None, None, None), None, ("dp",), ("dp", None)], ("dp", None, "tp"), mesh)
    # ... and with fp8_math (a permission the CPU kernel does not use: the exact reading's results).
    check("mla 656-byte rows, fp8_math, sequences on dp, heads on tp",
          lambda *a: jaxpaged.mla_decode(*a, scale=0.05, causal=True, fp8_math=True),
          lambda *a: reference.mla_decode(*a, scale=0.05, causal=True),
          (q_nope, q_pe, rows, None, lens, table),
          [q_spec, q_spec, (None, None, None), None, ("dp",), ("dp", None)], ("dp", None, "tp"), mesh)
    check("mla split caches, sequences on dp, heads on tp", op, ref,
          (q_nope, q_pe, cache[..., :512], cache[..., 512:], lens, table),
          [q_spec, q_spec, (None, None, None), (None, None, None), ("dp",), ("dp", None)],
          ("dp", None, "tp"), mesh)


def write_cases(mesh):
    """write_kv with the caches and new tokens split over KV heads (tp): each device writes its own
    heads' rows, no collective. (check compares both results: the k and the v cache.)"""
    for layout, kv_dim in (("NHD", 2), ("HND", 1)):
        _, k, v, _, _ = paged_inputs(layout)
        n = 20
        new_k = jnp.asarray(rng.standard_normal((n, 2, 64)), jnp.float32)
        new_v = jnp.asarray(rng.standard_normal((n, 2, 64)), jnp.float32)
        slots = jnp.asarray(np.concatenate([rng.permutation(k.shape[0] * 16)[: n - 2], [-1, 10**6]]), jnp.int32)
        cache = [None] * 4
        cache[kv_dim] = "tp"

        def op(*a, layout=layout):
            return jaxpaged.write_kv(*a, kv_layout=layout, unique_slots=True)

        def ref(*a, layout=layout):
            return reference.write_kv(*a, kv_layout=layout)
        for impl in ("rows", "scatter"):  # (the write_rows op's sharding rule, and XLA's scatter)
            jaxpaged.cache_write.WRITE_IMPL = impl
            jax.clear_caches()  # (the choice is read while tracing, and op's trace would be kept)
            check(f"write_kv {layout} ({impl}), heads on tp", op, ref, (k, v, new_k, new_v, slots),
                  [cache, cache, (None, "tp", None), (None, "tp", None), None], tuple(cache), mesh)
    # write_mla_kv's split caches (3-d: one head, so nothing of them splits): replicated caches
    # and tokens, each device writes them all, no collective.
    ckv = jnp.asarray(rng.standard_normal((32, 16, 512)), jnp.float32)
    kpe = jnp.asarray(rng.standard_normal((32, 16, 64)), jnp.float32)
    n = 12
    slots = jnp.asarray(np.concatenate([rng.permutation(32 * 16)[: n - 2], [-1, 10**6]]), jnp.int32)
    new_c = jnp.asarray(rng.standard_normal((n, 512)), jnp.float32)
    new_r = jnp.asarray(rng.standard_normal((n, 64)), jnp.float32)
    for impl in ("rows", "scatter"):
        jaxpaged.cache_write.WRITE_IMPL = impl
        jax.clear_caches()
        check(f"write_mla_kv split ({impl}), replicated", functools.partial(jaxpaged.write_mla_kv, unique_slots=True),
              reference.write_mla_kv, (ckv, kpe, new_c, new_r, slots), [(None,) * 3, (None,) * 3, None, None, None],
              None, mesh)
    jaxpaged.cache_write.WRITE_IMPL = "auto"
    jax.clear_caches()


def uneven_split_case():
    """A split that does not divide: 4-way tp over 2 KV heads (q's 8 heads do split 4 ways, but not
    in whole GQA groups). The op then computes the heads whole (gathering q), still exactly."""
    wide_tp = Mesh(devices[:4].reshape(1, 4), ("dp", "tp"))
    q, k, v, lens, table = paged_inputs("NHD")

    def op(*a):
        return jaxpaged.paged_attention(*a, return_lse=True)

    def ref(*a):
        return reference.paged_attention(*a, return_lse=True)
    check("paged decode, 4-way tp over 2 KV heads", op, ref, (q, k, v, lens, table),
          [(None, "tp", None), None, None, None, None], None, wide_tp, no_collectives=False)


if __name__ == "__main__":
    for m in meshes():
        paged_cases(m)
        mla_cases(m)
        write_cases(m)
    if len(devices) >= 4:
        uneven_split_case()
    print("all sharded cases match the reference")
