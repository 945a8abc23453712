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
    JAXPAGED_LIST_FREE_SEQS=$lim timeout 120 python3 "$R/$E/list_free_scan.py" 2>&1 | grep -E "us$|Error" | sed "s/^/scan /" \
      | tee -a "$OUT/list_free_scan.log"
  done
done
python3 "$R/$E/scan_table.py" "$OUT/list_free_scan.log" scan@1 scan@1024  # (the list, the own order)
echo "total $(( $(date +%s) - start )) s"
