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
OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 base=. s2=$s2 > "$OUT/ab_build.log" 2>&1 &
ab_pid=$!
sleep 8  # (ab.sh has copied and patched the trees)
san=/tmp/san_s2
(cmake -S /tmp/ab_src_s2 -B $san -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_SANITIZE_DRIVER=ON -DJAXPAGED_CUDA_ARCHS=90a > /tmp/san_build.log 2>&1 &&
  nice ninja -C $san jaxpaged_sanitize >> /tmp/san_build.log 2>&1; echo "sanitizer driver build rc $?") &
san_pid=$!
wait $ab_pid
grep -E "builds|FAILED" "$OUT/ab_build.log"
wait $san_pid
echo "builds done $(( $(date +%s) - start )) s"
cd /tmp
for r in 1 2; do
  for v in base:256 s2:1024 s2:1; do
    JAXPAGED_LIST_FREE_SEQS=${v#*:} PYTHONPATH=/tmp/ab_${v%%:*}:/tmp/site timeout 60 python3 "$repo/$E/list_free_scan.py" 2>&1 \
      | grep -E "us$|Error" | sed "s/^/${v%%:*} /" >> "$OUT/search2_scan.log"
  done
done
echo "scan done $(( $(date +%s) - start )) s"
python3 - "$OUT/search2_scan.log" <<'PY'
import collections, re, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) list_free_limit=(\S+) (\S+) S=(\d+) (\S+): ([\d.]+) us", line)
    if m: t[(m.group(3), int(m.group(4)), m.group(5), m.group(1) + m.group(2))].append(float(m.group(6)))
print("kind  S      lengths  HEAD(256)  s2 list(=1)  s2 own(=1024) (us, best of 2)")
for key in sorted({k[:3] for k in t}):
    g = lambda v: min(t[key + (v,)]) if t[key + (v,)] else 0
    print(f"{key[0]:5} {key[1]:5} {key[2]:7} {g('base256'):8.1f} {g('s21'):10.1f} {g('s21024'):10.1f}")
PY
cd "$repo"
AB_REUSE=1 OUT=$OUT/ab timeout 250 bash bench/ab.sh 2 base=. s2=$s2 -- --ours-step --only decode_b64_ctx4k \
  decode_fp8_b64_ctx4k decode_b256_ctx1k decode_varlen_b128 > "$OUT/ab_time.log" 2>&1
grep -E "^==|^decode" "$OUT/ab/ab.log" | cut -c1-160
echo "timing done $(( $(date +%s) - start )) s"
cd /tmp
left=$(( 585 - ($(date +%s) - start) ))
for tool in memcheck racecheck; do
  quick=$([[ $tool == racecheck ]] && echo --quick)
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $san/jaxpaged_sanitize $quick --paged-only \
    > "$OUT/sanitize_$tool.log" 2>&1 &
done
PYTHONPATH=/tmp/ab_s2:/tmp/site timeout $left python3 -m pytest -q -p no:cacheprovider -n 6 /tmp/ab_src_s2/tests/test_paged_attention.py \
  /tmp/ab_src_s2/tests/test_fp8.py /tmp/ab_src_s2/tests/test_plan.py -k "several_waves or plan" > "$OUT/tests_s2.log" 2>&1
echo "tests of s2: rc $? - $(tail -1 "$OUT/tests_s2.log")"
wait
for tool in memcheck racecheck; do echo "$tool: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitize_$tool.log" | tail -1) | $(tail -1 "$OUT/sanitize_$tool.log")"; done
ls "$OUT" "$OUT/ab"
echo "total $(( $(date +%s) - start )) s"
