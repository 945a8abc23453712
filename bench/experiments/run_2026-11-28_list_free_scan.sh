#!/usr/bin/env bash
# Prepared in session 37, not run: where the list-free pure decode (NOTES item 58 d, f) stops
# paying. One build of HEAD + the mends + an env override of the limit; list_free_scan.py with the
# list for every multi-wave call (=1) and with the blocks' own search up to 1024 (=1024), twice
# each, alternating. Set kListFreeSeqs in launch_tiles.cuh to the largest S where =1024 wins.
#   run tool: command "bash bench/experiments/run_2026-11-28_list_free_scan.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
patch -p1 --quiet < $E/2026-11-28_paged_length_order_mends.patch || { echo "PATCH FAILED"; exit 1; }
patch -p1 --quiet < $E/2026-11-28_paged_list_free_limit_env.patch || { echo "PATCH FAILED"; exit 1; }
build_into /tmp/jlf
for r in 1 2; do
  for lim in 1 1024; do
    JAXPAGED_LIST_FREE_SEQS=$lim timeout 120 python3 "$R/$E/list_free_scan.py" 2>&1 | grep -E "us$|Error" \
      | tee -a "$OUT/list_free_scan.log"
  done
done
python3 - "$OUT/list_free_scan.log" <<'PY'
import collections, re, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"list_free_limit=(\d+) (\S+) S=(\d+) (\S+): ([\d.]+) us", line)
    if m: t[(m.group(2), int(m.group(3)), m.group(4), m.group(1))].append(float(m.group(5)))
for key in sorted({k[:3] for k in t}):
    a, b = t[key + ("1",)], t[key + ("1024",)]
    print(f"{key[0]:5} S={key[1]:5} {key[2]:7} list {min(a) if a else 0:7.1f}  own {min(b) if b else 0:7.1f} us")
PY
echo "total $(( $(date +%s) - start )) s"
