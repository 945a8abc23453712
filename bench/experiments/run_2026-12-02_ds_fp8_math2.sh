#!/usr/bin/env bash
# Session 56, call 3 (carry .whl; ~450 s): the kDF mode after the workspace fix (mla_decode's
# workspace now knows fp8_math: the 656-byte rows' exact reading with fp8_math takes the Hopper
# path), its tests again; and where its time goes (NOTES item 81): two diagnostic variants with
# wrong results, timed only - noser (the four latent groups in one S^T chain, no per-group waits
# or scale FMAs) and onep (one P^T block for all groups: a quarter of P^T's conversions).
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export PYTHONUNBUFFERED=1
OUT=$OUT bash bench/ab.sh 0 base=. noser=patch:$E/2026-12-02_kdf_diag_noser.patch \
  onep=patch:$E/2026-12-02_kdf_diag_onep.patch > "$OUT/ab_build.log" 2>&1
tail -3 "$OUT/ab_build.log"
R=$(pwd)
cd /tmp || exit 1
PYTHONPATH=/tmp/ab_base:$PYTHONPATH timeout 230 python3 -m pytest -q -p no:cacheprovider -n 8 "$R/tests/test_fp8.py" \
  "$R/tests/test_workspace.py" -k "fp8_math or 656 or workspace" > "$OUT/tests.log" 2>&1
echo "tests rc $?: $(tail -1 "$OUT/tests.log")"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -12
for round in 1 2; do
  for v in base noser onep; do
    PYTHONPATH=/tmp/ab_$v:$PYTHONPATH timeout 60 python3 "$R/bench/bench.py" --ours-only --ours-step \
      --only mla_656fp8math_h128_b64_ctx4k 2>&1 | grep -E "^mla" | cut -c1-100 | sed "s/^/$v: /"
  done
done
PYTHONPATH=/tmp/ab_base:$PYTHONPATH timeout 100 compute-sanitizer --tool memcheck --print-limit 20 python3 -m pytest -q \
  -p no:cacheprovider -p no:xdist "$R/tests/test_fp8.py" -k "scales_across_tokens and 16" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY|passed|failed' "$OUT/memcheck.log" | tail -2 | tr '\n' ' ')"
echo "total $(( $(date +%s) - start )) s"
