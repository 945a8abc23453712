"""Table of run_2026-11-30_mla_spread.sh: per run and config our per-call / per-layer time and
FlashMLA's (from each run's h100.json or h200.json), and the SM clock (MHz), power (W) and the
throttle-reason masks seen by nvidia-smi over the run's window.

    python3 bench/experiments/mla_spread_table.py OUT_DIR
"""
import datetime
import glob
import json
import os
import sys

out = sys.argv[1]
windows = {}
for line in open(os.path.join(out, "windows.txt")):
    _, i, what, t = line.split()
    windows.setdefault(int(i), {})[what] = float(t)
samples = []
for line in open(os.path.join(out, "smi.csv")):
    f = [x.strip() for x in line.split(",")]
    try:
        t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        samples.append((t, float(f[1].split()[0]), float(f[3].split()[0]), f[5]))
    except (ValueError, IndexError):
        continue
print("run  config                 ours ms  ours us/layer  flashmla ms  flashmla us/layer  SM MHz (min-mean)  W (mean)  throttle")
for i in sorted(windows):
    w = windows[i]
    inside = [s for s in samples if w.get("start", 0) <= s[0] <= w.get("end", 1e18)]
    clk = f"{min(s[1] for s in inside):.0f}-{sum(s[1] for s in inside) / len(inside):.0f}" if inside else "n/a"
    pw = f"{sum(s[2] for s in inside) / len(inside):.0f}" if inside else "n/a"
    reasons = ",".join(sorted({s[3] for s in inside})) if inside else "n/a"
    for path in glob.glob(os.path.join(out, f"run{i}", "h*.json")):
        for r in json.load(open(path)):
            print(f"{i:<4} {r['config']:22s} {r['ours_ms']:7.3f}  {r['ours_step_us']:13.1f}  "
                  f"{r.get('flashmla_ms') or float('nan'):11.3f}  {r.get('flashmla_step_us') or float('nan'):17.1f}  "
                  f"{clk:>17s}  {pw:>8s}  {reasons}")
