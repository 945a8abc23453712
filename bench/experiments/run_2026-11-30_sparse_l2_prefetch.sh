#!/usr/bin/env bash
# Prepared in session 39, not run: issue 18's sparse 656 gather with an L2 prefetch of tile u + 2's
# rows (2026-11-30_sparse_l2_prefetch.patch, NOTES item 62: each of a row's two loader threads asks
# every other 128-byte line of the row's 656 bytes into L2 two tiles ahead; item 59 j's second
# proposal). The sparse instance compiles as HEAD's (168 registers, no spills). Predicted: up to the
# gather's ~0.7 us of ~4.0 a tile where DRAM latency is exposed (0-15% on sparse_h128_b64); nothing
# if the ring already hides it (the rows gather (item 60 d) said lines per copy are not the cost).
# (1) base and pf built (bench/ab.sh), pf's tests first (test_mla_sparse), then 2 rounds of the
#     sparse configs per call and per layer; (2) memcheck of pf's MLA driver cases in the time left.
#   run tool: command "bash bench/experiments/run_2026-11-30_sparse_l2_prefetch.sh", carry [".whl"], kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
sparse_ab pf $E/2026-11-30_sparse_l2_prefetch.patch
