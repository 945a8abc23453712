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
cd /tmp
for r in 1 2; do
  for v in old:1024 new:1024 new:1; do
    JAXPAGED_LIST_FREE_SEQS=${v#*:} PYTHONPATH=/tmp/ab_${v%%:*}:/tmp/site timeout 60 python3 "$repo/$E/list_free_scan.py" 2>&1 \
      | grep -E "us$|Error" | sed "s/^/${v%%:*} /" >> "$OUT/search_scan.log"
  done
done
echo "scan done $(( $(date +%s) - start )) s"
python3 - "$OUT/search_scan.log" <<'PY'
import collections, re, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) list_free_limit=(\d+) (\S+) S=(\d+) (\S+): ([\d.]+) us", line)
    if m: t[(m.group(3), int(m.group(4)), m.group(5), m.group(1) + m.group(2))].append(float(m.group(6)))
print("kind  S      lengths  list(new@1)  old@1024  new@1024 (us, best of 2)")
for key in sorted({k[:3] for k in t}):
    g = lambda v: min(t[key + (v,)]) if t[key + (v,)] else 0
    print(f"{key[0]:5} {key[1]:5} {key[2]:7} {g('new1'):9.1f} {g('old1024'):9.1f} {g('new1024'):9.1f}")
PY
PYTHONPATH=/tmp/ab_new:/tmp/site timeout 100 python3 -m pytest -q -p no:cacheprovider -n 8 /tmp/ab_src_new/tests/test_paged_attention.py \
  /tmp/ab_src_new/tests/test_fp8.py /tmp/ab_src_new/tests/test_plan.py -k "several_waves or plan" > "$OUT/tests_new.log" 2>&1
echo "tests of new: rc $? - $(tail -1 "$OUT/tests_new.log")"
wait $san_pid
left=$(( 580 - ($(date +%s) - start) ))
for tool in memcheck racecheck; do
  quick=$([[ $tool == racecheck ]] && echo --quick)
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $san/jaxpaged_sanitize $quick --paged-only \
    > "$OUT/sanitize_$tool.log" 2>&1 &
done
wait
for tool in memcheck racecheck; do echo "$tool: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitize_$tool.log" | tail -1) | $(tail -1 "$OUT/sanitize_$tool.log")"; done
tail -3 /tmp/san_build.log | grep -i error
ls "$OUT" "$OUT/ab"
echo "total $(( $(date +%s) - start )) s"
