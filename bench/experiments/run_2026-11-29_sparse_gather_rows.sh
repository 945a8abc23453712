#!/usr/bin/env bash
# Prepared in session 38, not run: issue 18's sparse 656 gather with lanes along a row
# (2026-11-29_sparse_gather_rows.patch, NOTES item 59 j: warp w copies rows 16w..16w+15 one at a
# time, 512 contiguous bytes a copy instruction instead of 32 bytes of 16 rows; predicted up to
# ~8% on sparse_h128_b64 if the L1TEX wavefronts are half the gather's ~0.7 us a tile). The sparse
# instance compiles with the same registers and no spills (168, as HEAD).
# (1) base and rows built (bench/ab.sh), rows' tests first (test_mla_sparse, test_fp8 -k 656 or
#     sparse), then 2 rounds of the sparse configs per call and per layer;
# (2) memcheck of rows' MLA driver cases (the sparse lists among them) in the time left.
#   run tool: command "bash bench/experiments/run_2026-11-29_sparse_gather_rows.sh", carry [".whl"], kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
sparse_ab rows $E/2026-11-29_sparse_gather_rows.patch
