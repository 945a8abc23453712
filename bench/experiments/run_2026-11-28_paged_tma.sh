#!/usr/bin/env bash
# Session 48 (NOTES item 73): the fp8 decode tile kernel's stages by TMA, in one call (carry .whl):
#  1. the package (sm_90a) into /tmp/jp, and beside it the sanitizer driver (/tmp/san);
#  2. the GPU tests that reach the fp8 decode instance (test_fp8 paged, the decode loop, the
#     adversarial paged draws, sinks, plans), with memcheck of the driver's paged cases beside them;
#  3. ROUNDS (default 3) rounds of JAXPAGED_PAGED_TMA=0 (the cp.async stages, as before) against the
#     default (TMA) on the three fp8 decode configs and bf16 b64 (untouched: the control), per call
#     and per layer, alternating;
#  4. PROBE=1: tools/dsmem_rate_probe.cu (issue 18's gate, session 47's next-session entry).
#   run tool: command "bash bench/experiments/run_2026-11-28_paged_tma.sh", carry [".whl"]
# Ran on 0c09687 (log bench/logs/2026-11-28_h200_session48_paged_tma.log). The TMA path lost and is
# not in the package: on later trees apply 2026-11-28_paged_tma.patch first (`patch -p1`).
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
ROUNDS=${ROUNDS:-3}
(cmake -S . -B /tmp/san -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_SANITIZE_DRIVER=ON -DJAXPAGED_CUDA_ARCHS=90a \
   > /tmp/san_build.log 2>&1 && nice ninja -C /tmp/san jaxpaged_sanitize >> /tmp/san_build.log 2>&1
 echo "sanitizer build rc $?") &
san_pid=$!
build_into /tmp/jp  # (then in /tmp, R = the repository)
wait $san_pid
echo "builds done $(( $(date +%s) - start )) s"
(timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/san/jaxpaged_sanitize --paged-only \
   > "$OUT/memcheck_paged.log" 2>&1; echo "memcheck rc $?" >> "$OUT/memcheck_paged.log") &
mc_pid=$!
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 "$R/tests/test_fp8.py" "$R/tests/test_decode_loop.py" \
  "$R/tests/test_adversarial.py" "$R/tests/test_sinks.py" "$R/tests/test_plan.py" -k "paged or loop or vmap_keeps_each_instances or sinks_under" \
  > "$OUT/tests.log" 2>&1
echo "tests: rc $? - $(tail -1 "$OUT/tests.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -10
wait $mc_pid
echo "memcheck: $(grep -E "ERROR SUMMARY" "$OUT/memcheck_paged.log" | tail -1) | $(tail -1 "$OUT/memcheck_paged.log")"
grep -E "FAILED|differs" "$OUT/memcheck_paged.log" | head -5
echo "tests done $(( $(date +%s) - start )) s"
# Which kernel a plain fp8 decode call runs (ncu lists the launches it profiled: the TMA twin's name
# has "tma" in it), then the same under JAXPAGED_PAGED_TMA=0.
cat > /tmp/one_call.py <<'PY'
import jax, jax.numpy as jnp, numpy as np, jaxpaged
B, H, Hkv, D, page, L = 8, 32, 8, 128, 16, 2048
q = jnp.ones((B, H, D), jnp.bfloat16)
k = jnp.zeros((B * L // page, page, Hkv, D), jnp.float8_e4m3fn)
t = jnp.arange(B * L // page, dtype=jnp.int32).reshape(B, L // page)
lens = jnp.full((B,), L, jnp.int32)
print(float(jaxpaged.paged_attention(q, k, k, lens, t, k_scale=1.0, v_scale=1.0).astype(jnp.float32).sum()))
PY
for v in 1 0; do
  JAXPAGED_PAGED_TMA=$v timeout 90 ncu --kernel-name regex:paged_tile --launch-count 1 --metrics gpu__time_duration.sum \
    python3 /tmp/one_call.py 2>&1 | grep -E "paged_tile|duration" | cut -c1-160
done
CONFIGS="decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k decode_fp8_h64_b32_ctx8k decode_b64_ctx4k"
for r in $(seq "$ROUNDS"); do
  for v in cpasync tma; do
    echo "== $v round $r" | tee -a "$OUT/ab.log"
    env $([[ $v == cpasync ]] && echo JAXPAGED_PAGED_TMA=0) timeout 120 python3 "$R/bench/bench.py" --ours-only \
      --ours-step --out "/tmp/ab_${v}_$r" --only $CONFIGS 2>&1 | grep -E "^decode|Error|error" | tee -a "$OUT/ab.log"
  done
done
echo "timing done $(( $(date +%s) - start )) s"
[[ -n ${PROBE:-} ]] && dsmem_probe 60
echo "total $(( $(date +%s) - start )) s"
