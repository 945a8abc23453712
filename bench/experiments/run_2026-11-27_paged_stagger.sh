#!/usr/bin/env bash
# Session 37: do the paged tile kernel's blocks lose time by starting and ending in phase? Pure
# decode over several waves (fp8 b64: 1536 blocks of ~1366 keys, 3 a SM) runs 78.8% of copy BW
# against b8_ctx32k's 91% (one wave of long blocks; NOTES item 52 c: per-block fixed part). The
# patch moves each (tile, KV head)'s interior split boundaries by -1/0/+1 quarter (st) or third
# (st3) of a split, hashed from blockIdx.x, so the blocks sharing an SM end, and their successors
# start, at different times. stdir: st plus the list-free pure decode (JAXPAGED_PAGED_DIRECT=1,
# item 53 a) - what the two together would give per call. 2 rounds, per call and per layer.
#   run tool: command "bash bench/experiments/run_2026-11-27_paged_stagger.sh", carry [".whl"]
set -uo pipefail
source bench/experiments/run_lib.sh
use_peers
export JAXPAGED_PAGED_DIRECT=1  # (read only by stdir's build)
timeout 560 bash bench/ab.sh 2 base=. st=patch:$E/2026-11-27_paged_split_stagger.patch \
  st3=patch:$E/2026-11-27_paged_split_stagger3.patch \
  stdir=patch:$E/2026-11-27_paged_split_stagger.patch+$E/2026-11-26_paged_decode_direct_env.patch \
  -- --only decode_fp8_b64_ctx4k decode_b64_ctx4k decode_b256_ctx1k decode_varlen_b128 decode_b16_ctx2k \
  --ours-step > "$OUT/ab_stdout.log" 2>&1
grep -E "builds|FAILED|total" "$OUT/ab_stdout.log"
python3 - "$OUT/ab.log" <<'PY'
import re, sys, collections
cur, t = None, collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"== (\S+) round", line)
    if m: cur = m.group(1); continue
    m = re.match(r"(\S+)\s+ours\s+([\d.]+) ms\s+step ([\d.]+) us/layer\s+([\d.]+)% BW", line)
    if m: t[(m.group(1), cur)].append((float(m.group(2)), float(m.group(3)), float(m.group(4))))
cfgs = sorted({c for c, _ in t}); vs = sorted({v for _, v in t})
print("config".ljust(24), *[v.rjust(22) for v in vs])
for c in cfgs:
    print(c.ljust(24), *[" / ".join(f"{x[0]:.3f}|{x[1]:.1f}" for x in t[(c, v)]).rjust(22) for v in vs])
PY
echo "total $(( $(date +%s) - start )) s"
