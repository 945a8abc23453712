"""jaxpaged: paged attention and MLA decode for JAX serving stacks, as XLA FFI kernels.

    out = jaxpaged.paged_attention(q, k_cache, v_cache, kv_lens, block_tables)
    out, lse = jaxpaged.mla_decode(q_nope, q_pe, ckv_cache, None, kv_lens, block_tables, scale=s)
    plan = jaxpaged.mla_decode_plan(kv_lens, block_tables, num_heads=Hq, page_size=page)  # per step
    out, lse = jaxpaged.mla_decode(..., plan=plan)  # each layer: same results, less work per call
    plan = jaxpaged.paged_attention_plan(kv_lens, block_tables, cu_q_lens, num_q_heads=Hq,
                                         num_kv_heads=Hkv, page_size=page, num_tokens=T)  # likewise
    k_cache, v_cache = jaxpaged.write_kv(k_cache, v_cache, k_new, v_new, slot_mapping)

Both are jittable and vmappable; jaxpaged.reference holds their exact jnp definitions.
"""

from jaxpaged import reference
from jaxpaged._extension import GPU_PLATFORM as gpu_platform
from jaxpaged.cache_write import write_kv, write_mla_kv
from jaxpaged.mla_decode import MlaDecodePlan, mla_decode, mla_decode_plan
from jaxpaged.mla_decode_sparse import mla_decode_sparse, mla_decode_sparse_plan
from jaxpaged.paged_attention import PagedAttentionPlan, paged_attention, paged_attention_plan

__all__ = ["paged_attention", "paged_attention_plan", "PagedAttentionPlan", "mla_decode", "mla_decode_plan", "MlaDecodePlan", "mla_decode_sparse", "mla_decode_sparse_plan", "write_kv",
           "write_mla_kv", "reference", "gpu_platform"]
__version__ = "0.1.0"
