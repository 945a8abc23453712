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
OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 base=. hyb=$hyb > "$OUT/ab_build.log" 2>&1 &
ab_pid=$!
sleep 8  # (ab.sh has copied and patched the trees)
san=/tmp/san_hyb
(cmake -S /tmp/ab_src_hyb -B $san -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_SANITIZE_DRIVER=ON -DJAXPAGED_CUDA_ARCHS=90a > /tmp/san_build.log 2>&1 &&
  nice ninja -C $san jaxpaged_sanitize >> /tmp/san_build.log 2>&1; echo "sanitizer driver build rc $?") &
san_pid=$!
wait $ab_pid
grep -E "builds|FAILED" "$OUT/ab_build.log"
wait $san_pid
echo "builds done $(( $(date +%s) - start )) s"
cd /tmp
for r in 1 2; do
  for v in base hyb; do
    PYTHONPATH=/tmp/ab_$v:/tmp/site timeout 60 python3 "$repo/$E/list_free_scan.py" 2>&1 \
      | grep -E "us$|Error" | sed "s/^/$v /" >> "$OUT/hybrid_scan.log"
  done
done
echo "scan done $(( $(date +%s) - start )) s"
python3 - "$OUT/hybrid_scan.log" <<'PY'
import collections, re, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) list_free_limit=\S+ (\S+) S=(\d+) (\S+): ([\d.]+) us", line)
    if m: t[(m.group(2), int(m.group(3)), m.group(4), m.group(1))].append(float(m.group(5)))
print("kind  S      lengths    base     hyb (us, best of 2)")
for key in sorted({k[:3] for k in t}):
    g = lambda v: min(t[key + (v,)]) if t[key + (v,)] else 0
    print(f"{key[0]:5} {key[1]:5} {key[2]:7} {g('base'):8.1f} {g('hyb'):8.1f}")
PY
cd "$repo"
AB_REUSE=1 OUT=$OUT/ab timeout 250 bash bench/ab.sh 2 base=. hyb=$hyb -- --ours-step --only decode_b64_ctx4k \
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
PYTHONPATH=/tmp/ab_hyb:/tmp/site timeout $left python3 -m pytest -q -p no:cacheprovider -n 6 /tmp/ab_src_hyb/tests/test_paged_attention.py \
  /tmp/ab_src_hyb/tests/test_fp8.py /tmp/ab_src_hyb/tests/test_plan.py -k "several_waves or plan" > "$OUT/tests_hyb.log" 2>&1
echo "tests of hyb: rc $? - $(tail -1 "$OUT/tests_hyb.log")"
wait
for tool in memcheck racecheck; do echo "$tool: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitize_$tool.log" | tail -1) | $(tail -1 "$OUT/sanitize_$tool.log")"; done
ls "$OUT" "$OUT/ab"
echo "total $(( $(date +%s) - start )) s"
