#!/usr/bin/env bash
# Prepared in session 38, not run: one dependent read fewer before a block's first K/V copy
# (NOTES item 59 c-d: the per-block serial prologue is what short and equal blocks pay).
#   kl  = 2026-11-29_paged_known_len.patch: the blocks' own search hands the found sequence's
#         clamped KV length to attend_tile, which then skips its kv_lens[seq] read (own order);
#   kll = 2026-11-29_paged_known_len_and_list.patch: kl, and the call's own tile list of pure
#         decode carries each small tile's KV length in its word (never a plan's, which may come
#         from other kv_lens): the list path skips that read too.
# (1) base, kl, kll built at once, kll's sanitizer driver beside them;
# (2) bench.py --ours-only --ours-step, 2 rounds, on the multi-wave decode configs and
#     mixed_prefill_decode (kll's LARGE instance compiles to 173 registers, was 220: no spills,
#     still 2 blocks an SM);
# (3) list_free_scan.py on each once;
# (4) kll's paged tests beside memcheck and racecheck of its paged driver cases.
#   run tool: command "bash bench/experiments/run_2026-11-29_known_len_ab.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
repo=$(pwd)
s2=patch:$E/2026-11-29_paged_known_len_and_list.patch  # (kll)
build_with_sanitizer kll base=. kl=patch:$E/2026-11-29_paged_known_len.patch kll=$s2
scan_variants "$OUT/known_len_scan.log" 1 base kl kll
python3 "$repo/$E/scan_table.py" "$OUT/known_len_scan.log" base kl kll
cd "$repo"
AB_REUSE=1 OUT=$OUT/ab timeout 270 bash bench/ab.sh 2 base=. kl=patch:$E/2026-11-29_paged_known_len.patch kll=$s2 -- --ours-step \
  --only decode_b64_ctx4k decode_fp8_b64_ctx4k decode_b256_ctx1k decode_varlen_b128 mixed_prefill_decode > "$OUT/ab_time.log" 2>&1
grep -E "^==|^decode|^mixed" "$OUT/ab/ab.log" | cut -c1-160
echo "timing done $(( $(date +%s) - start )) s"
paged_sanitize_beside_tests kll "not mla"
ls "$OUT" "$OUT/ab"
echo "total $(( $(date +%s) - start )) s"
