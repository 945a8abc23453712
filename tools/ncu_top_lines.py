"""Aggregate an `ncu --page source --csv --print-source sass` export: top SASS rows by warp stall
samples and by instructions executed, and opcode shares.

    python tools/ncu_top_lines.py FILE.csv [N]
"""
import collections
import csv
import re
import sys


def num(v):
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return 0.0


def opcode(sass):
    sass = re.sub(r"^@!?U?P\w+\s+", "", (sass or "").strip())  # drop a predicate
    return sass.split(" ")[0] if sass else "?"


def main(path, n):
    table = list(csv.reader(open(path, errors="replace")))
    h = next(i for i, r in enumerate(table) if len(r) >= 5)  # the header: skip preamble lines
    rows = [dict(zip(table[h], r)) for r in table[h + 1:] if len(r) == len(table[h])]
    if not rows:
        print("no rows")
        return
    cols = list(rows[0])
    print("columns:", cols)
    samp = [c for c in cols if "Sampling" in c and "All" in c] or [c for c in cols if "Sampling" in c]
    inst = [c for c in cols if c.startswith("Instructions Executed")]
    metrics = [(c[0], sum(num(r[c[0]]) for r in rows)) for c in (samp, inst) if c]
    print("totals:", ", ".join(f"{c} {t:.0f}" for c, t in metrics))
    keycols = [c for c in cols if c in ("#", "Address", "Line")]
    for col, tot in metrics:
        print(f"\n=== top {n} by {col}")
        for r in sorted(rows, key=lambda r: -num(r[col]))[:n]:
            key = " ".join(str(r.get(c, "")) for c in keycols)
            print(f"{100 * num(r[col]) / max(tot, 1):5.1f}%  {key:>8} | {(r.get('Source') or '')[:110]}")
    for col, tot in metrics:
        hist = collections.Counter()
        for r in rows:
            hist[opcode(r.get("Source"))] += num(r[col])
        print(f"\n=== opcodes by {col}")
        print("  ".join(f"{k}:{100 * v / max(tot, 1):.1f}%" for k, v in hist.most_common(30)))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
