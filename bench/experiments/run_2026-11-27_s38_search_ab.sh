#!/usr/bin/env bash
# Session 38, call 2: the list-free decode's in-kernel search, rewritten with four barriers
# whatever S is (2026-11-27_paged_search_ballot.patch = the review's mends + the new search + a
# float length_bucket), against session 37's search (the mends alone), both with the env override
# of the limit (JAXPAGED_LIST_FREE_SEQS). Call 1 measured the old search losing to the list on
# varied short sequences (bf16 S=256: 136.6 vs 126.5 us; S=1024: 514 vs 432).
# (1) both built at once (bench/ab.sh 0), the new tree's sanitizer driver beside them;
# (2) list_free_scan.py twice: old at 1024, new at 1024, new at 1 (the list), alternating;
# (3) the new build's multi-wave tests and test_plan;
# (4) compute-sanitizer memcheck and racecheck of the new build's paged driver cases.
#   run tool: command "bash bench/experiments/run_2026-11-27_s38_search_ab.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
repo=$(pwd)
env_p=$E/2026-11-28_paged_list_free_limit_env.patch
OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 old=patch:$E/2026-11-28_paged_length_order_mends.patch+$env_p \
  new=patch:$E/2026-11-27_paged_search_ballot.patch+$env_p > "$OUT/ab_build.log" 2>&1 &
ab_pid=$!
sleep 5  # (ab.sh has copied and patched the trees)
san=/tmp/san_new
mkdir -p /tmp/san_src && (cd /tmp/san_src && tar -C "$repo" --exclude=./.whl --exclude=./.git -cf - . | tar -xf - &&
  patch -p1 --quiet < "$repo/$E/2026-11-27_paged_search_ballot.patch" &&
  cmake -S . -B $san -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_SANITIZE_DRIVER=ON -DJAXPAGED_CUDA_ARCHS=90a > /tmp/san_build.log 2>&1 &&
  nice ninja -C $san jaxpaged_sanitize >> /tmp/san_build.log 2>&1; echo "sanitizer driver build rc $?") &
san_pid=$!
wait $ab_pid
grep -E "builds|FAILED" "$OUT/ab_build.log"
echo "builds done $(( $(date +%s) - start )) s"
scan_variants "$OUT/search_scan.log" 2 old:1024 new:1024 new:1
python3 "$repo/$E/scan_table.py" "$OUT/search_scan.log" new@1 old@1024 new@1024
wait $san_pid
paged_sanitize_beside_tests new "several_waves or plan"
tail -3 /tmp/san_build.log | grep -i error
ls "$OUT" "$OUT/ab"
echo "total $(( $(date +%s) - start )) s"
