"""Aggregate an `ncu --page source --csv --print-source sass` export: top SASS rows by warp stall samples and by
instructions executed, and opcode shares (python tools/ncu_top_lines.py FILE.csv [N])."""
import csv, sys, io
path, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40
all_rows = list(csv.reader(open(path, errors="replace")))
h = next(i for i, r in enumerate(all_rows) if len(r) >= 5)  # the header: skip preamble lines
rows = [dict(zip(all_rows[h], r)) for r in all_rows[h + 1:] if len(r) == len(all_rows[h])]
if not rows:
    print("no rows"); sys.exit()
cols = list(rows[0].keys())
print("columns:", cols)
def num(v):
    try: return float(str(v).replace(",", ""))
    except Exception: return 0.0
samp = [c for c in cols if "Sampling" in c and "All" in c] or [c for c in cols if "Sampling" in c]
inst = [c for c in cols if c.startswith("Instructions Executed")] or [c for c in cols if "Instructions Executed" in c]
src = [c for c in cols if c in ("Source", "# Source", "Line", "#")] + [c for c in cols if "Source" in c]
scol = samp[0] if samp else None
icol = inst[0] if inst else None
tot_s = sum(num(r[scol]) for r in rows) if scol else 0
tot_i = sum(num(r[icol]) for r in rows) if icol else 0
print(f"total samples {tot_s:.0f} ({scol}); total inst {tot_i:.0f} ({icol})")
keycols = [c for c in cols if c in ("#", "Address", "Line")]
def show(col, tot):
    print(f"\n=== top {n} by {col}")
    for r in sorted(rows, key=lambda r: -num(r[col]))[:n]:
        s = " ".join(str(r.get(c, "")) for c in keycols)
        text = (r.get("Source") or "")[:110]
        extra = " ".join(f"{c.split('(')[0][:18]}={r[c]}" for c in cols if "Stall" in c and num(r[c]) > 0.05 * max(num(r[col]), 1) and c != col)[:200]
        print(f"{100*num(r[col])/max(tot,1):5.1f}%  {s:>8} | {text} | {extra}")
if scol: show(scol, tot_s)
if icol: show(icol, tot_i)
import collections, re
def opcode(t):
    t = re.sub(r"^@!?U?P\w+\s+", "", (t or "").strip())
    return t.split(" ")[0] if t else "?"
for col, tot in ((icol, tot_i), (scol, tot_s)):
    if not col: continue
    hist = collections.Counter()
    for r in rows: hist[opcode(r.get("Source"))] += num(r[col])
    print(f"\n=== opcodes by {col}")
    print("  ".join(f"{k}:{100*v/max(tot,1):.1f}%" for k, v in hist.most_common(30)))
