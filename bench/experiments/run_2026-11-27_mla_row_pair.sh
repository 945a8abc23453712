#!/usr/bin/env bash
# Prepared in session 36, not run: the two row blocks of each MLA partition as a 2-block cluster
# sharing every tile by TMA multicast (2026-11-27_mla_row_pair_multicast.patch: the TMA instance
# at an even number of row blocks, i.e. Hq = 128 s_q = 1; each loader asks for half of a group's
# boxes, multicast to both blocks; each compute warp's release also arrives on the other block's
# empty barrier, with CUTLASS's default arrive semantics; JAXPAGED_MLA_PAIR=0 opts out). NOTES item
# 28 c measured the same idea at -3 to -4% on session 8's kernel; session 35's reading (item 56 i)
# - the L2-to-SM bytes, twice the DRAM bytes at h128, move at ~4.5 TB/s against FlashMLA's ~4.9 -
# is why it is worth timing again. ptxas: 24 / 36 bytes spilled (stores / loads) against HEAD's
# 16 / 16. The ctx scan of both, then the variant's tests.
#   run tool: command "bash bench/experiments/run_2026-11-27_mla_row_pair.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
OUT=$OUT/ab timeout 300 bash bench/ab.sh 0 head=. mc=patch:$E/2026-11-27_mla_row_pair_multicast.patch \
  > "$OUT/ab_build.log" 2>&1
grep -E "builds|FAILED" "$OUT/ab_build.log"
echo "builds done $(( $(date +%s) - start )) s"
ctx_scan head mc
variant_tests mc test_mla_decode.py test_plan.py
echo "total $(( $(date +%s) - start )) s"
