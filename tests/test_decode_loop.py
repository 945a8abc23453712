"""A serving loop end to end: small random models prefill prompts in chunks, then decode 32 steps;
every step writes its new K/V into the paged cache (write_kv / write_mla_kv) and attends with our op.
The logits at every position must match a dense (non-paged) causal-attention run of the same model
over the same tokens. GQA with sinks, on a 16-bit cache and fp8 ones (e4m3; e5m2 with its scales
traced and padding tokens, slot -1, in every write); MLA on its 16-bit combined cache, an e4m3
combined cache (with sinks) and DeepSeek-V3.2's 656-byte rows (quantized the same way on the dense
side); each step with and without a plan made once for its layers (paged_attention_plan /
mla_decode_plan)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxpaged
from jaxpaged import _fp8
from cases import ON_GPU

VOCAB, MODEL, LAYERS, STEPS, CHUNK, PAGE = 64, 96, 2, 32, 5, 8
PROMPTS = (13, 7)  # two sequences of different lengths
DTYPE = jnp.bfloat16 if ON_GPU else jnp.float32
TOL = 3e-2 if ON_GPU else 2e-4  # on logits of size ~1


def _weights(rng, shapes):
    """Projections keep activations near unit size (embeddings are unit-normal), so scores are O(1)
    and attention is far from uniform: a wrong key, scale or sink shows in the logits."""
    return {k: jnp.asarray(rng.standard_normal(s) / (1 if k == "embed" else np.sqrt(s[0])), jnp.float32)
            for k, s in shapes.items()}


def _mm(x, w):
    """A projection as both runs compute it, in DTYPE (bf16 on the GPU). The dense model uses it
    too, so its K/V reach the cache's quantization with the same rounding as the serving loop's
    (an fp8 cache turns a one-ulp bf16 difference into a 6% one)."""
    return x.astype(DTYPE) @ w.astype(DTYPE)


def _tokens(rng):
    return [rng.integers(0, VOCAB, p + STEPS) for p in PROMPTS]


def _run_paged(tokens, step, caches):
    """Prefill in chunks of CHUNK rows per sequence (one ragged call for both), then STEPS decode
    steps; returns each sequence's logits at every position it computed ([len, VOCAB]), the final
    caches and the block tables."""
    lengths = [0, 0]
    logits = [[], []]
    num_pages = caches[0][0].shape[0]
    tables = np.arange(num_pages, dtype=np.int32)[::-1].reshape(2, -1)  # sequence 1 owns the low pages, reversed
    while True:
        prefill = any(lengths[s] < PROMPTS[s] for s in range(2))
        take = [min(CHUNK, PROMPTS[s] - lengths[s]) if prefill else 1 for s in range(2)]
        if not prefill and lengths[0] >= len(tokens[0]):
            break
        rows = np.concatenate([tokens[s][lengths[s]:lengths[s] + take[s]] for s in range(2)])
        pos = np.concatenate([np.arange(lengths[s], lengths[s] + take[s]) for s in range(2)])
        seq = np.repeat([0, 1], take)
        slots = tables[seq, pos // PAGE] * PAGE + pos % PAGE
        lengths = [lengths[s] + take[s] for s in range(2)]
        cu = np.concatenate([[0], np.cumsum(take)]).astype(np.int32)
        out, caches = step(caches, jnp.asarray(rows), jnp.asarray(slots, jnp.int32),
                                   jnp.asarray(lengths, jnp.int32), jnp.asarray(tables), jnp.asarray(cu), prefill)
        for s in range(2):
            logits[s].append(np.asarray(out[cu[s]:cu[s + 1]], np.float32))
    return [np.concatenate(l_) for l_ in logits], caches, tables


def _check_written(i, name, own, cached, fmt, scale=1.0):
    """Values a layer wrote into the cache, against the dense model's own: within one step of the
    cache's format in layer 0 (the same x on both sides; a wrong slot is far off); later layers'
    x differ by the attention above (within TOL), which their values carry through."""
    fmt = jnp.finfo(fmt)
    tiny = float(fmt.smallest_subnormal) * scale
    slack = 0 if i == 0 else TOL
    np.testing.assert_allclose(own, cached, rtol=2.0 ** -fmt.nmant + slack, atol=tiny + 1e-5 + slack,
                               err_msg=f"layer {i}: the cache's {name} differs from the dense model's")


# ---- GQA with sinks -------------------------------------------------------------------------
HQ, HKV, D = 4, 2, 64


def _gqa_model(rng):
    shapes = {"embed": (VOCAB, MODEL), "unembed": (MODEL, VOCAB)}
    for i in range(LAYERS):
        shapes |= {f"wq{i}": (MODEL, HQ * D), f"wk{i}": (MODEL, HKV * D), f"wv{i}": (MODEL, HKV * D),
                   f"wo{i}": (HQ * D, MODEL)}
    w = _weights(rng, shapes)
    w |= {f"sinks{i}": jnp.asarray(rng.standard_normal(HQ), jnp.float32) for i in range(LAYERS)}
    return w


def _gqa_dense(w, tokens, cache_dtype, scales, written):
    """The same model without pages. Each layer's K/V are its own projections quantized as the
    cache stores them; in layer 0 they must equal what the loop wrote to within one unit in the last
    place of the cache's format (a wrong slot is far off), and the attention then runs over the
    written values, so that a rounding flip upstream (bf16 matmul order) cannot move one fp8 value
    by a whole 6% step and the comparison stays tight."""
    x = w["embed"][tokens]
    n = len(tokens)
    causal = np.tril(np.ones((n, n), bool))
    for i in range(LAYERS):
        q = _mm(x, w[f"wq{i}"]).astype(jnp.float32).reshape(n, HKV, HQ // HKV, D)
        for t, scale, cached in zip("kv", scales, written[i]):
            own = _mm(x, w[f"w{t}{i}"]).astype(jnp.float32).reshape(n, HKV, D)
            if cache_dtype is not None:  # what the cache holds, read back
                own = _fp8.dequantize(_fp8.quantize(own, scale, cache_dtype), scale)
            _check_written(i, t, own, cached, cache_dtype or DTYPE, scale if cache_dtype else 1.0)
        k, v = (jnp.asarray(c) for c in written[i])
        s = jnp.einsum("thgd,uhd->hgtu", q, k) / np.sqrt(D)
        s = jnp.where(causal, s, -jnp.inf)
        m = s.max(-1, keepdims=True)
        e = jnp.exp(s - m)
        den = e.sum(-1, keepdims=True) + jnp.exp(w[f"sinks{i}"].reshape(HKV, -1)[..., None, None] - m)
        o = jnp.einsum("hgtu,uhd->thgd", e / den, v).reshape(n, HQ * D).astype(DTYPE)
        x = x + o.astype(jnp.float32) @ w[f"wo{i}"]
    return x @ w["unembed"]


# traced_pad: the fp8 scales are jit arguments (traced), and every write carries three padding
# tokens (slot -1, junk values) that must never land in the cache.
@pytest.mark.parametrize("cache_dtype, use_plan, traced_pad", [(None, False, False), (None, True, False),
                                                               ("float8_e4m3fn", True, False),
                                                               ("float8_e5m2", False, True)])
def test_gqa_decode_loop_matches_dense_model(rng, cache_dtype, use_plan, traced_pad):
    w = _gqa_model(rng)
    tokens = _tokens(rng)
    scales = (0.05, 0.02)
    num_pages = 2 * -(-(max(PROMPTS) + STEPS) // PAGE)
    dtype = cache_dtype or DTYPE
    caches = [(jnp.zeros((num_pages, PAGE, HKV, D), dtype), jnp.full((num_pages, PAGE, HKV, D), jnp.nan, dtype))
              for _ in range(LAYERS)]

    @functools.partial(jax.jit, static_argnums=7, donate_argnums=0)
    def step_with(caches, scale_args, rows, slots, lengths, tables, cu, prefill):
        # (traced_pad: the jit arguments; else the Python numbers, static)
        k_scale, v_scale = scale_args if traced_pad else scales
        fp8 = dict(k_scale=k_scale, v_scale=v_scale) if cache_dtype else {}
        x = w["embed"][rows]
        new = []
        cu = cu if prefill else None
        # A serving step's tile list, made once for both layers (as a serving stack would).
        plan = jaxpaged.paged_attention_plan(lengths, tables, cu, num_q_heads=HQ, num_kv_heads=HKV, page_size=PAGE,
                                             num_tokens=None if cu is None else rows.shape[0]) if use_plan else None
        for i, (kc, vc) in enumerate(caches):
            q = _mm(x, w[f"wq{i}"]).reshape(-1, HQ, D)
            k, v = (_mm(x, w[f"w{t}{i}"]).reshape(-1, HKV, D) for t in "kv")
            if traced_pad:  # padding tokens: slot -1, values far from any real one
                junk = jnp.full((3, HKV, D), 7.0, k.dtype)
                kc, vc = jaxpaged.write_kv(kc, vc, jnp.concatenate([junk, k]), jnp.concatenate([junk, v]),
                                           jnp.concatenate([jnp.full((3,), -1, slots.dtype), slots]), **fp8)
            else:
                kc, vc = jaxpaged.write_kv(kc, vc, k, v, slots, **fp8)
            o = jaxpaged.paged_attention(q, kc, vc, lengths, tables, cu, sinks=w[f"sinks{i}"], plan=plan, **fp8)
            x = x + o.reshape(-1, HQ * D).astype(jnp.float32) @ w[f"wo{i}"]
            new.append((kc, vc))
        return x @ w["unembed"], new

    def step(caches, *args):
        return step_with(caches, jnp.asarray(scales, jnp.float32), *args)

    paged, caches, tables = _run_paged(tokens, step, caches)
    for s in range(2):
        pos = np.arange(len(tokens[s]))
        slots = tables[s, pos // PAGE] * PAGE + pos % PAGE
        written = [[np.asarray(_fp8.dequantize(c.reshape(-1, HKV, D)[slots], scale) if cache_dtype else
                               c.reshape(-1, HKV, D)[slots].astype(jnp.float32))
                    for c, scale in zip(layer, scales)] for layer in caches]
        dense = _gqa_dense(w, jnp.asarray(tokens[s]), cache_dtype, scales, written)
        np.testing.assert_allclose(paged[s], np.asarray(dense), atol=TOL, rtol=TOL)


# ---- MLA ---------------------------------------------------------------------------------------
MLA_HEADS, LATENT, ROPE = 16, 512, 64


def _mla_model(rng):
    shapes = {"embed": (VOCAB, MODEL), "unembed": (MODEL, VOCAB)}
    for i in range(LAYERS):
        shapes |= {f"wqn{i}": (MODEL, MLA_HEADS * LATENT), f"wqp{i}": (MODEL, MLA_HEADS * ROPE),
                   f"wc{i}": (MODEL, LATENT), f"wr{i}": (MODEL, ROPE), f"wo{i}": (MLA_HEADS * LATENT, MODEL)}
    w = _weights(rng, shapes)
    w |= {f"sinks{i}": jnp.asarray(rng.standard_normal(MLA_HEADS), jnp.float32) for i in range(LAYERS)}
    return w


SCALE = 1 / np.sqrt(192)


MLA_KV_SCALE = 0.02  # the e4m3 combined cache's kv_scale


def _mla_dense(w, tokens, ds_rows, written):
    """The same model without pages, attending over the latent/rope values the loop wrote (checked
    against its own first), as _gqa_dense does. ds_rows "fp8": an e4m3 combined cache at
    MLA_KV_SCALE, with the layers' sinks."""
    x = w["embed"][tokens]
    n = len(tokens)
    causal = np.tril(np.ones((n, n), bool))
    for i in range(LAYERS):
        qn = _mm(x, w[f"wqn{i}"]).astype(jnp.float32).reshape(n, MLA_HEADS, LATENT)
        qp = _mm(x, w[f"wqp{i}"]).astype(jnp.float32).reshape(n, MLA_HEADS, ROPE)
        c, r = (_mm(x, w[f"w{t}{i}"]).astype(jnp.float32) for t in "cr")
        if ds_rows == "fp8":
            cr = _fp8.dequantize(_fp8.quantize(jnp.concatenate([c, r], -1), MLA_KV_SCALE, jnp.float8_e4m3fn),
                                 MLA_KV_SCALE)
            c, r = cr[:, :LATENT], cr[:, LATENT:]
            _check_written(i, "latent", c, written[i][0], jnp.float8_e4m3fn, MLA_KV_SCALE)
            _check_written(i, "rope", r, written[i][1], jnp.float8_e4m3fn, MLA_KV_SCALE)
        else:
            if ds_rows:
                c, r = _fp8.unpack_ds_rows(_fp8.pack_ds_rows(c, r), ds_rows)
            _check_written(i, "latent", c, written[i][0], jnp.float8_e4m3fn if ds_rows else DTYPE)
            _check_written(i, "rope", r, written[i][1], jnp.bfloat16 if ds_rows else DTYPE)
        c, r = (jnp.asarray(v) for v in written[i])
        s = jnp.where(causal, (jnp.einsum("thd,ud->htu", qn, c) + jnp.einsum("thd,ud->htu", qp, r)) * SCALE, -jnp.inf)
        if ds_rows == "fp8":  # with the layer's sinks: a key of that score and a zero value
            m = s.max(-1, keepdims=True)
            e = jnp.exp(s - m)
            p = e / (e.sum(-1, keepdims=True) + jnp.exp(w[f"sinks{i}"][:, None, None] - m))
        else:
            p = jax.nn.softmax(s, axis=-1)
        o = jnp.einsum("htu,ud->thd", p, c).reshape(n, -1).astype(DTYPE)
        x = x + o.astype(jnp.float32) @ w[f"wo{i}"]
    return x @ w["unembed"]


# ds_rows: None (a bf16 combined cache), "fp8" (an e4m3 combined cache, with sinks) or 656-byte rows
# read with that ds_dequant.
@pytest.mark.parametrize("ds_rows, use_plan", [(None, False), (None, True), ("float32", True), ("bfloat16", False),
                                               ("float16", True), ("fp8", True)])
def test_mla_decode_loop_matches_dense_model(rng, ds_rows, use_plan):
    w = _mla_model(rng)
    tokens = [t[:PROMPTS[1] + STEPS] for t in _tokens(rng)]  # equal lengths: one s_q per call
    prompt, num_pages = PROMPTS[1], 2 * -(-(PROMPTS[1] + STEPS) // PAGE)
    fp8 = ds_rows == "fp8"
    cache_of = {"fp8": lambda: jnp.zeros((num_pages, PAGE, LATENT + ROPE), jnp.float8_e4m3fn),
                None: lambda: jnp.zeros((num_pages, PAGE, LATENT + ROPE), DTYPE)}
    caches = [cache_of.get(ds_rows, lambda: jnp.zeros((num_pages, PAGE, 656), jnp.uint8))() for _ in range(LAYERS)]
    scale_kw = dict(kv_scale=MLA_KV_SCALE) if fp8 else {}
    tables = jnp.arange(num_pages, dtype=jnp.int32).reshape(2, -1)

    @functools.partial(jax.jit, donate_argnums=0)
    def step(caches, rows, positions):  # rows, positions: [2, s_q]
        x = w["embed"][rows]
        slots = (tables[jnp.arange(2)[:, None], positions // PAGE] * PAGE + positions % PAGE).reshape(-1)
        lengths = positions[:, -1] + 1
        new = []
        plan = jaxpaged.mla_decode_plan(lengths, tables, num_heads=MLA_HEADS, page_size=PAGE,
                                        s_q=rows.shape[1]) if use_plan else None
        for i, cache in enumerate(caches):
            qn = _mm(x, w[f"wqn{i}"]).reshape(2, -1, MLA_HEADS, LATENT)
            qp = _mm(x, w[f"wqp{i}"]).reshape(2, -1, MLA_HEADS, ROPE)
            c, r = (_mm(x, w[f"w{t}{i}"]).reshape(-1, w[f"w{t}{i}"].shape[1]) for t in "cr")
            cache, _ = jaxpaged.write_mla_kv(cache, None, c, r, slots, **scale_kw)
            o, _ = jaxpaged.mla_decode(qn, qp, cache, None, lengths, tables, scale=SCALE, causal=True, plan=plan,
                                       ds_dequant="float32" if ds_rows in (None, "fp8") else ds_rows,
                                       sinks=w[f"sinks{i}"] if fp8 else None, **scale_kw)
            x = x + o.reshape(2, -1, MLA_HEADS * LATENT).astype(jnp.float32) @ w[f"wo{i}"]
            new.append(cache)
        return x @ w["unembed"], new

    toks = np.stack(tokens)
    logits = []
    for begin, size in [(0, 4), (4, prompt - 4)] + [(prompt + t, 1) for t in range(STEPS)]:
        pos = np.arange(begin, begin + size)[None, :].repeat(2, 0).astype(np.int32)
        out, caches = step(caches, jnp.asarray(toks[:, begin:begin + size]), jnp.asarray(pos))
        logits.append(np.asarray(out, np.float32))
    paged = np.concatenate(logits, axis=1)
    tables = np.asarray(tables)
    for s in range(2):
        pos = np.arange(toks.shape[1])
        rows = [c.reshape(-1, c.shape[-1])[tables[s, pos // PAGE] * PAGE + pos % PAGE] for c in caches]
        def read(r):
            if fp8:
                r = _fp8.dequantize(r, MLA_KV_SCALE)
            return _fp8.unpack_ds_rows(r, ds_rows) if ds_rows and not fp8 else (r[:, :LATENT], r[:, LATENT:])
        written = [tuple(np.asarray(v, np.float32) for v in read(r)) for r in rows]
        dense = _mla_dense(w, jnp.asarray(toks[s]), ds_rows, written)
        np.testing.assert_allclose(paged[s], np.asarray(dense), atol=TOL, rtol=TOL)
