#!/usr/bin/env bash
# Prepared in session 38, not run: why the list path costs pure decode more than its list kernel
# (NOTES item 59 d: with equal lengths the list path was 3-14 us slower per call than the blocks'
# own order, and a hybrid whose first wave skipped the wait did not close it). One build of HEAD +
# 2026-11-29_paged_list_env_knobs.patch (JAXPAGED_LIST_FREE_SEQS, and JAXPAGED_CHAIN_LIST=0: the
# attention kernel behind its own list as a plain launch, not a dependent one); list_free_scan.py
# three ways, twice, alternating:
#   own  = the default limits (HEAD's behaviour);
#   lc   = the list for every multi-wave call, dependent launch (HEAD past its limits);
#   lp   = the list for every multi-wave call, plain launch.
# If lp beats lc, the dependent launch itself (or griddepcontrol.wait in every block) is the cost,
# and it also touches every ragged call; if lp = lc, it is the list read a block.
#   run tool: command "bash bench/experiments/run_2026-11-29_list_chain.sh", carry [".whl"], kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
patch -p1 --quiet < $E/2026-11-29_paged_list_env_knobs.patch || { echo "PATCH FAILED"; exit 1; }
build_into /tmp/jlc
for r in 1 2; do
  for v in own:default:1 lc:1:1 lp:1:0; do
    IFS=: read -r name lim chain <<< "$v"
    env=(JAXPAGED_CHAIN_LIST=$chain)
    [[ $lim != default ]] && env+=(JAXPAGED_LIST_FREE_SEQS=$lim)
    env "${env[@]}" timeout 60 python3 "$R/$E/list_free_scan.py" 2>&1 | grep -E "us$|Error" | sed "s/^/$name /" \
      >> "$OUT/list_chain_scan.log"
  done
done
python3 "$R/$E/scan_table.py" "$OUT/list_chain_scan.log" own lc lp
echo "total $(( $(date +%s) - start )) s"
