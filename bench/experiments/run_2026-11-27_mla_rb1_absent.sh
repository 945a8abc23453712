#!/usr/bin/env bash
# NOTES item 54 b (diagnostic, timeline only): is the refill leg the SM's own feed or a shared
# path? mla_h128_b64_ctx4k and b128_ctx8k with the second row block's 66 blocks exiting at once
# (2026-11-27_mla_rb1_absent.patch: half the L2 -> SM bytes, the same DRAM bytes) beside HEAD.
# A pair period well under HEAD's ~6900 cycles points at the shared path (L2 / crossbar), so TMA
# multicast to a 2-block cluster would pay; the same period, at the SM's own chain.
#   run tool: command "bash bench/experiments/run_2026-11-27_mla_rb1_absent.sh"
set -uo pipefail
source bench/experiments/run_lib.sh
source $E/trace_lib.sh
rm -rf /tmp/src_rb1 && mkdir -p /tmp/src_rb1
tar --exclude=./abtmp --exclude=./.whl --exclude=./build --exclude=./.git -cf - . | tar -xf - -C /tmp/src_rb1
patch -d /tmp/src_rb1 -p1 --quiet < $E/2026-11-27_mla_rb1_absent.patch || echo "PATCH FAILED"
trace_build . /tmp/trace_base /tmp/trace_build_base.log &
trace_build /tmp/src_rb1 /tmp/trace_rb1 /tmp/trace_build_rb1.log &
wait
echo "builds: $(( $(date +%s) - start )) s"
for v in base rb1; do
  trace_report /tmp/trace_$v /tmp/tr_$v.bin "$OUT/trace_${v}_b64.txt" || tail -5 /tmp/trace_build_$v.log
  trace_report /tmp/trace_$v /tmp/tr_${v}_8k.bin "$OUT/trace_${v}_b128_8k.txt" 128 128 8192
  echo "$v b64: $(head -1 "$OUT/trace_${v}_b64.txt")"
  echo "$v b128 8k: $(head -1 "$OUT/trace_${v}_b128_8k.txt")"
done
echo "total: $(( $(date +%s) - start )) s"
