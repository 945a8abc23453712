#!/usr/bin/env bash
# Session 48 (NOTES item 73 b): the TMA fp8 decode stages' L2 promotion, in one call (carry .whl): the
# working tree with 2026-11-28_paged_tma_promo_env.patch applied (JAXPAGED_TMA_PROMO = 0 / 64 / 128 /
# 256 bytes, read per call) built into /tmp/jp, then ROUNDS rounds of cp.async (JAXPAGED_PAGED_TMA=0)
# against TMA with each promotion on the three fp8 decode configs, alternating.
#   run tool: command "bash bench/experiments/run_2026-11-28_paged_tma_promo.sh", after
#   `patch -p1 < bench/experiments/2026-11-28_paged_tma.patch` (the TMA path, not in the package) and
#   the promotion patch in the working tree. Ran on 581f21f + the promotion patch
#   (log bench/logs/2026-11-28_h200_session48_paged_tma_promo.log).
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
ROUNDS=${ROUNDS:-2}
build_into /tmp/jp
CONFIGS="decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k decode_fp8_h64_b32_ctx8k"
for r in $(seq "$ROUNDS"); do
  for v in cpasync promo256 promo0 promo128; do
    echo "== $v round $r" | tee -a "$OUT/ab.log"
    case $v in cpasync) e="JAXPAGED_PAGED_TMA=0";; promo*) e="JAXPAGED_TMA_PROMO=${v#promo}";; esac
    env $e timeout 90 python3 "$R/bench/bench.py" --ours-only --ours-step --out "/tmp/ab_${v}_$r" --only $CONFIGS \
      2>&1 | grep -E "^decode|Error|error" | cut -c1-100 | tee -a "$OUT/ab.log"
  done
done
echo "total $(( $(date +%s) - start )) s"
