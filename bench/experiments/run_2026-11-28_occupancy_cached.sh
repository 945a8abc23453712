#!/usr/bin/env bash
# Session 53: the occupancy split with memory_mbps cached per device (the first run of item 77 f's patch
# measured its per-call time at 0.74 ms against 0.33: two attribute queries on every call). 2 rounds
# against HEAD, then the fp8 split tests. run tool: carry [".whl"], ~330 s.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
patch_ab 2026-11-30_paged_occupancy_splits_cached.patch 2 200 \
  decode_fp8_d256_softcap_b32_ctx8k decode_fp8_h64_b32_ctx8k decode_d256_softcap_b32_ctx8k
(cd /tmp && PYTHONPATH=/tmp/ab_new:/tmp/site timeout 120 python3 -m pytest -q -p no:cacheprovider -n 4 /tmp/ab_src_new/tests/test_fp8.py -k "occupancy or split_inside" > "$OUT/tests_new.log" 2>&1); echo "tests rc $? $(tail -1 $OUT/tests_new.log)"
echo "total $(( $(date +%s) - start )) s"
