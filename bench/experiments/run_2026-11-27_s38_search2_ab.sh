#!/usr/bin/env bash
# Session 38, call 4: the list-free decode's per-block search with its serial parts made
# warp-parallel (2026-11-27_paged_search_warp.patch: the review's mends; a float length_bucket;
# each warp scans the bucket histogram itself; one ballot a warp and pass for the sequences in
# rank's bucket, and a warp scan of those 32 masks' counts: four barriers whatever S is) against
# HEAD. Call 2 measured the first ballot version (a 32-step serial walk at the end): -7% at
# S=1024 varied, level at S<=256 where the search still lost to the list by 8% (bf16 S=256
# varied); call 3's hybrid (list always, first wave in sequence order) lost on equal lengths.
# (1) both built (bench/ab.sh 0), s2's sanitizer driver beside them;
# (2) list_free_scan.py on each, twice, alternating (HEAD's limit 256; s2's too);
# (3) bench.py --ours-only --ours-step on the four multi-wave decode configs, 2 rounds;
# (4) s2's multi-wave tests and test_plan beside memcheck and racecheck of its paged driver cases.
#   run tool: command "bash bench/experiments/run_2026-11-27_s38_search2_ab.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
repo=$(pwd)
s2=patch:$E/2026-11-27_paged_search_warp.patch+$E/2026-11-28_paged_list_free_limit_env.patch
build_with_sanitizer s2 base=. s2=$s2
scan_variants "$OUT/search2_scan.log" 2 base:256 s2:1024 s2:1
python3 "$repo/$E/scan_table.py" "$OUT/search2_scan.log" base@256 s2@1 s2@1024
cd "$repo"
AB_REUSE=1 OUT=$OUT/ab timeout 250 bash bench/ab.sh 2 base=. s2=$s2 -- --ours-step --only decode_b64_ctx4k \
  decode_fp8_b64_ctx4k decode_b256_ctx1k decode_varlen_b128 > "$OUT/ab_time.log" 2>&1
grep -E "^==|^decode" "$OUT/ab/ab.log" | cut -c1-160
echo "timing done $(( $(date +%s) - start )) s"
paged_sanitize_beside_tests s2 "several_waves or plan"
ls "$OUT" "$OUT/ab"
echo "total $(( $(date +%s) - start )) s"
