"""The GPU workspace comes from C++ alone: the lowered call's extra result is exactly the size the
extension computes for the device, and the MLA op reserves only its own path's share."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpaged
from jaxpaged import _extension
from cases import ON_GPU, PORTABLE


def custom_call_results(fn, *args) -> list[list[int]]:
    """Result shapes of the jaxpaged custom call in fn's lowered StableHLO."""
    text = jax.jit(fn).lower(*args).as_text()
    line = next(l for l in text.splitlines() if "stablehlo.custom_call @jaxpaged_" in l)
    results = line.rsplit("->", 1)[1]
    return [[int(d) for d in dims.split("x")[:-1]] for dims in re.findall(r"tensor<([0-9x]+\w+)>", results)]


def mla_args(batch, heads, ctx, page):
    pages = batch * ctx // page
    return (jax.ShapeDtypeStruct((batch, 1, heads, 512), jnp.bfloat16),
            jax.ShapeDtypeStruct((batch, 1, heads, 64), jnp.bfloat16),
            jax.ShapeDtypeStruct((pages, page, 576), jnp.bfloat16), None,
            jax.ShapeDtypeStruct((batch,), jnp.int32),
            jax.ShapeDtypeStruct((batch, ctx // page), jnp.int32))


def paged_args(tokens, hq, hkv, dim, seqs, max_pages, page):
    return (jax.ShapeDtypeStruct((tokens, hq, dim), jnp.bfloat16),
            jax.ShapeDtypeStruct((seqs * max_pages, page, hkv, dim), jnp.bfloat16),
            jax.ShapeDtypeStruct((seqs * max_pages, page, hkv, dim), jnp.bfloat16),
            jax.ShapeDtypeStruct((seqs,), jnp.int32), jax.ShapeDtypeStruct((seqs, max_pages), jnp.int32),
            jax.ShapeDtypeStruct((seqs + 1,), jnp.int32))


def mla(q_nope, q_pe, ckv, kpe, lens, table):
    return jaxpaged.mla_decode(q_nope, q_pe, ckv, kpe, lens, table, scale=0.1)


@pytest.mark.skipif(ON_GPU, reason="the CPU call has no workspace")
def test_cpu_call_has_no_workspace():
    args = mla_args(batch=2, heads=16, ctx=256, page=64)
    assert custom_call_results(mla, *args) == [[2, 1, 16, 512], [2, 1, 16]]


def test_extension_sizes_paged_workspace():
    # T = 64 tokens of GQA group 4 (one per sequence), 4096 keys of room: a 2-word header and
    # ceil(64 * 4 / 64) + 64 list entries (two words each), then up to
    # min(ceil(4096 / (64 * 8)), 64, 4096 / 128) = 8 splits of 64 x 32 rows x (128 + 1) floats.
    nbytes = _extension.paged_attention_workspace_bytes(
        num_tokens=64, num_q_heads=32, num_kv_heads=8, head_dim=128, num_seqs=64, max_pages=256,
        page_size=16, device=-1)
    assert nbytes == 4 * (2 * (4 + 64 + 1) + 8 * 64 * 32 * 129)


@pytest.mark.skipif(not ON_GPU, reason="GPU lowering only")
@pytest.mark.parametrize("batch,heads,ctx", [(64, 128, 4096), (1, 128, 32768), (128, 16, 4096)])
def test_mla_workspace_is_the_devices_path(batch, heads, ctx):
    device = jax.devices()[0]
    args = mla_args(batch, heads, ctx, page=64)
    results = custom_call_results(mla, *args)
    assert len(results) == 3  # out, lse, workspace
    nbytes = _extension.mla_decode_workspace_bytes(
        batch=batch, s_q=1, num_heads=heads, max_pages=ctx // 64, page_size=64, device=device.local_hardware_id)
    assert results[2] == [max(-(-nbytes // 4), 1)]
    print(f"mla_decode B={batch} Hq={heads} L={ctx} on {device.device_kind}: workspace "
          f"{results[2][0] * 4 / 2**20:.2f} MiB")
    sms = getattr(device, "core_count", None)
    if sms and getattr(device, "compute_capability", "").startswith("9") and not PORTABLE:
        # The Hopper path: schedule + two partial results per partition (<= 160 partitions) and
        # row; never the sm_80 path's split buffers (which the portable kernel uses).
        rows = heads
        parts = max(1, min(sms, 160) // -(-rows // 64))
        schedule = -(-(2 + 2 * parts + 3 * batch) // 4) * 4
        assert results[2][0] == schedule + 2 * parts * rows * 513


@pytest.mark.skipif(not ON_GPU, reason="GPU lowering only")
def test_paged_workspace_matches_extension():
    args = paged_args(tokens=8, hq=8, hkv=2, dim=128, seqs=4, max_pages=16, page=16)
    results = custom_call_results(jaxpaged.paged_attention, *args)
    nbytes = _extension.paged_attention_workspace_bytes(
        num_tokens=8, num_q_heads=8, num_kv_heads=2, head_dim=128, num_seqs=4, max_pages=16, page_size=16,
        device=jax.devices()[0].local_hardware_id)
    assert results[2] == [nbytes // 4]


def test_extension_sizes_sparse_workspace():
    """Sparse MLA's GPU workspace comes from C++ too: the Hopper layout over B x s_q index lists
    where the wgmma kernel reads the format, else none (the portable kernel's one split)."""
    kw = dict(batch=8, s_q=2, num_heads=128, topk=2048, page_size=64, device=-1)
    sizes = {fmt: _extension.mla_decode_sparse_workspace_bytes(**kw, **dtypes) for fmt, dtypes in {
        "bf16": dict(q_dtype="bfloat16"),
        "656": dict(q_dtype="bfloat16", ckv_dtype="uint8"),
        "656 bf16": dict(q_dtype="bfloat16", ckv_dtype="uint8", ds_read=1),
        "656 f16": dict(q_dtype="bfloat16", ckv_dtype="uint8", ds_read=2),
        "656 fp16 q": dict(q_dtype="float16", ckv_dtype="uint8"),
        "fp8 latent + 16-bit rope": dict(q_dtype="bfloat16", ckv_dtype="float8_e4m3fn", kpe_dtype="bfloat16"),
    }.items()}
    assert sizes["656 fp16 q"] == 0 and sizes["fp8 latent + 16-bit rope"] == 0 and sizes["656"] == 0
    hopper = ON_GPU and not PORTABLE and jax.devices()[0].device_kind.startswith("NVIDIA H")
    if not hopper:
        assert set(sizes.values()) == {0}
        return
    sms = jax.devices()[0].core_count
    parts = max(1, min(sms, 160) // 2)  # 128 rows per list: 2 row blocks
    lists = 8 * 2
    expect = 4 * (-(-(2 + 2 * parts + 3 * lists) // 4) * 4 + 2 * parts * 128 * 513)
    # (exact 656 rows: the portable kernel; the float16 reading: the wide kernel, the Hopper layout)
    assert sizes["bf16"] == expect and sizes["656 bf16"] == expect and sizes["656 f16"] == expect


@pytest.mark.skipif(not ON_GPU, reason="GPU lowering only")
def test_sparse_workspace_matches_extension():
    args = (jax.ShapeDtypeStruct((4, 1, 64, 512), jnp.bfloat16), jax.ShapeDtypeStruct((4, 1, 64, 64), jnp.bfloat16),
            jax.ShapeDtypeStruct((64, 64, 656), jnp.uint8), None, jax.ShapeDtypeStruct((4, 1, 256), jnp.int32))
    fn = lambda q_nope, q_pe, ckv, kpe, idx: jaxpaged.mla_decode_sparse(q_nope, q_pe, ckv, kpe, idx, scale=0.1)  # noqa: E731
    results = custom_call_results(fn, *args)
    nbytes = _extension.mla_decode_sparse_workspace_bytes(
        batch=4, s_q=1, num_heads=64, topk=256, page_size=64, device=jax.devices()[0].local_hardware_id,
        q_dtype="bfloat16", ckv_dtype="uint8")
    assert results[2] == [max(-(-nbytes // 4), 1)]
