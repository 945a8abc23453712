#!/usr/bin/env bash
# Session 51, one call (carry .whl; ~300 s): after the DTR instance (9d925e3) the fp8 sweep found
# 256-block one-wave grids that choose_kv_splits' one-wave rule keeps unsplit gaining from splits
# on the H200 (fp8 h64_b32_ctx8k: 2 splits 0.147 -> 0.139 ms; fp8 d256: 3 splits 0.328 -> 0.279).
# Before refitting the rule, the same sweep over the 16-bit decode configs whose grids the rule
# touches, plus each config's grid (blocks, resident blocks, SMs, the launcher's count) printed by
# the log patch. Patches: 2026-11-29_paged_kv_splits_env.patch, 2026-11-28_paged_kv_splits_log.patch.
#   run tool: command "bash bench/experiments/run_2026-11-28_split_rule_sweep.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
build_patched /tmp/jp 2026-11-29_paged_kv_splits_env.patch 2026-11-28_paged_kv_splits_log.patch
FP8=${FP8:-"decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k decode_fp8_h64_b32_ctx8k decode_fp8_d64_h64_b64_ctx4k decode_fp8_d256_softcap_b32_ctx8k"}
B16=${B16:-"decode_h64_b32_ctx8k decode_d256_softcap_b32_ctx8k decode_b64_ctx4k decode_window_b64_ctx32k decode_mha_b32_ctx4k decode_b16_ctx2k decode_b256_ctx1k"}
echo "== grids" | tee -a "$OUT/split_sweep.log"
# shellcheck disable=SC2086
# (one process: each config's row follows the grid lines its calls printed)
JAXPAGED_KV_SPLITS_LOG=1 timeout 150 python3 "$R/bench/bench.py" --ours-only --only $B16 $FP8 2>&1 \
  | grep -E '^splits:|^decode|Error' | cut -c1-120 | tee -a "$OUT/split_sweep.log"
echo "grids done $(( $(date +%s) - start )) s"
# shellcheck disable=SC2086
split_sweep 80 "${SPLITS:-default 1 2 3 4}" $B16
echo "total $(( $(date +%s) - start )) s"
