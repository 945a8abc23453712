#!/usr/bin/env bash
# Ran (session 42) on the working tree with bench/experiments/2026-11-27_ds_dequant_loader_v1.patch applied
# (`patch -p1 < ...` first); main does not carry it (NOTES item 66). Logs: bench/logs/2026-11-27_session42_dq_loader.log.
# Session 42: what bounds the dequantizing loader's fill (NOTES item 66: ~6,400 cycles a tile).
# Two diagnostic variants of the working tree (wrong results, timing only), traced at the
# sparse_h128_b64_topk2048 shape with JAXPAGED_MLA_DS_DQ=1: "noconv" stores the raw bytes where
# the converted values go (loads, shuffles and stores kept), "noload" converts register data
# that no global load feeds (conversion and stores kept).
#   run tool: command "bash bench/experiments/run_2026-11-27_s42_dq_diag.sh", kind nvidia-h100-x1
set -uo pipefail
source bench/experiments/run_lib.sh
source bench/experiments/trace_lib.sh
F=src/mla_decode/sm90/fp8_ring.cuh
for v in noconv noload; do
  rm -rf /tmp/src_$v && mkdir -p /tmp/src_$v && tar --exclude=./.whl --exclude=./.git -cf - . | tar -xf - -C /tmp/src_$v
done
sed -i 's|        ds_dq_chunk(ring\[rs\]\[k\], scale, ev, od);|        ev = ring[rs][k]; od = ev; od.x ^= __float_as_uint(scale);|' /tmp/src_noconv/$F
sed -i 's|        ring\[rs\]\[k\] = src ? __ldg(q + 4 \* k) : make_uint4(0, 0, 0, 0);|        ring[rs][k] = make_uint4(ring[rs][k].y + 1, ring[rs][k].x, ring[rs][k].w, ring[rs][k].z);|' /tmp/src_noload/$F
grep -c "od.x ^= __float_as_uint" /tmp/src_noconv/$F; grep -c "ring\[rs\]\[k\].y + 1" /tmp/src_noload/$F
for v in noconv noload; do trace_build /tmp/src_$v /tmp/trace_$v "$OUT/trace_build_$v.log" & done
wait
echo "builds: $(( $(date +%s) - start )) s"
for v in noconv noload; do
  JAXPAGED_MLA_DS_DQ=1 TRACE_LINES=14 trace_run $v /tmp/trace_$v 128 64 4096 --cache=656 --topk=2048
done
cd "$OUT" && tar -czf trace_build_logs.tar.gz trace_build_*.log && rm -f trace_build_*.log
echo "total $(( $(date +%s) - start )) s"
