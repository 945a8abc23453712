#!/usr/bin/env bash
# Session 38, call 3: pure paged decode over several waves always behind its own tile list again,
# but the first wave's blocks see from kv_lens whether the list is sequence order (lengths all in
# one bucket) and then start without waiting for it (2026-11-27_paged_list_wait_hybrid.patch),
# against HEAD (session 37's per-block search up to 256 sequences). Calls 1-2 measured the search
# losing to the list on varied short sequences, and the list losing ~3 us to no list on equal ones.
# (1) both built (bench/ab.sh 0), hyb's sanitizer driver beside them;
# (2) list_free_scan.py on each, twice, alternating;
# (3) bench.py --ours-only --ours-step on the four multi-wave decode configs, 2 rounds;
# (4) hyb's multi-wave tests and test_plan beside memcheck and racecheck of its paged driver cases.
#   run tool: command "bash bench/experiments/run_2026-11-27_s38_hybrid_ab.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
repo=$(pwd)
hyb=patch:$E/2026-11-27_paged_list_wait_hybrid.patch
build_with_sanitizer hyb base=. hyb=$hyb
scan_variants "$OUT/hybrid_scan.log" 2 base hyb
python3 "$repo/$E/scan_table.py" "$OUT/hybrid_scan.log" base hyb
cd "$repo"
AB_REUSE=1 OUT=$OUT/ab timeout 250 bash bench/ab.sh 2 base=. hyb=$hyb -- --ours-step --only decode_b64_ctx4k \
  decode_fp8_b64_ctx4k decode_b256_ctx1k decode_varlen_b128 > "$OUT/ab_time.log" 2>&1
grep -E "^==|^decode" "$OUT/ab/ab.log" | cut -c1-160
echo "timing done $(( $(date +%s) - start )) s"
paged_sanitize_beside_tests hyb "several_waves or plan"
ls "$OUT" "$OUT/ab"
echo "total $(( $(date +%s) - start )) s"
