"""write_kv of 16K bf16 tokens at random slots into a 4 GiB bf16 cache (K + V), three times, for
ncu to capture the write_rows kernel alone (issue 17's write target; NOTES item 58 b)."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxpaged

HKV, D, PAGE, TOKENS = 8, 128, 16, 16384
pages = 4 * 2**30 // 2 // (PAGE * HKV * D * 2)
rng = np.random.default_rng(0)
k = jnp.zeros((pages, PAGE, HKV, D), jnp.bfloat16)
v = jnp.zeros((pages, PAGE, HKV, D), jnp.bfloat16)
k_new = jnp.asarray(rng.standard_normal((TOKENS, HKV, D)), jnp.bfloat16)
v_new = jnp.asarray(rng.standard_normal((TOKENS, HKV, D)), jnp.bfloat16)
slots = jnp.asarray(rng.choice(pages * PAGE, TOKENS, replace=False), jnp.int32)
write = jax.jit(jaxpaged.write_kv, donate_argnums=(0, 1))
for _ in range(3):
    k, v = write(k, v, k_new, v_new, slots)
jax.block_until_ready((k, v))
print("written", float(k[slots[0] // PAGE, slots[0] % PAGE, 0, 0]) == float(k_new[0, 0, 0]))
