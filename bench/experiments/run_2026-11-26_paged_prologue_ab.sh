#!/usr/bin/env bash
# Session 31 (NOTES item 52 g): the paged tile kernel's prologue with the first stages' table reads
# issued together, ahead of the queries (the working tree) against HEAD (abtmp/base: `mkdir -p
# abtmp/base && git archive HEAD | tar -x -C abtmp/base`, carried). The new tree's paged tests
# first, then 2 rounds of both on the decode configs, per call and per layer.
#   run tool: command "bash bench/experiments/run_2026-11-26_paged_prologue_ab.sh", carry [".whl", "abtmp"]
set -uo pipefail
OUT=${OUT:-/tmp/jaxpaged-out}
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl > /tmp/wheels.log 2>&1
export PYTHONPATH=/tmp/site XLA_PYTHON_CLIENT_PREALLOCATE=false
AB_TEST='new:tests/test_paged_attention.py tests/test_fp8.py tests/test_plan.py tests/test_sinks.py tests/test_adversarial.py -n 8 -k "not mla"' \
  AB_TEST_LIMIT=${AB_TEST_LIMIT:-200} bash bench/ab.sh ${ROUNDS:-2} base=abtmp/base new=. -- --only \
  ${CFGS:-decode_fp8_b64_ctx4k decode_fp8_b8_ctx32k decode_fp8_h64_b32_ctx8k decode_b64_ctx4k decode_b16_ctx2k decode_b256_ctx1k} \
  --ours-step 2>&1 | tail -40
rm -rf "$OUT"/base_* "$OUT"/new_* "$OUT"/build_*.log
