#!/usr/bin/env bash
# Prepared in session 56 (NOTES item 81 d), one call (carry .whl; ~400 s): kDF's S^T with its
# latent groups pipelined (2026-12-03_kdf_nhalf.patch: eight units of (group, query-row half),
# m64n32k32 steps into two 16-register partials in turn, each unit's scale FMAs while the next
# unit's products run; K read twice from shared memory; compiled: no C7512, 104 bytes of spills
# against HEAD's 180). A/B against HEAD on the two kDF configs, then nhalf's kDF tests.
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
OUT=$OUT timeout 330 bash bench/ab.sh 2 base=. nhalf=patch:$E/2026-12-03_kdf_nhalf.patch -- \
  --ours-step --only mla_656fp8math_h128_b64_ctx4k mla_656fp8math_h16_b128_ctx4k > "$OUT/ab_run.log" 2>&1
grep -E "^==|mla_656|FAILED|total" "$OUT/ab_run.log" | cut -c1-130 | tail -14
(cd /tmp && PYTHONPATH=/tmp/ab_nhalf:/tmp/site timeout $(( 590 - ($(date +%s) - start) )) python3 -m pytest -q \
  -p no:cacheprovider -n 8 /tmp/ab_src_nhalf/tests/test_fp8.py -k "fp8_math and 656 or scales_across" \
  > "$OUT/tests_nhalf.log" 2>&1)
echo "tests of nhalf: rc $? - $(tail -1 "$OUT/tests_nhalf.log")"
echo "total $(( $(date +%s) - start )) s"
