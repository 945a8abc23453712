"""The table of a list_free_scan.py A/B: its lines, each prefixed with a variant name
("NAME list_free_limit=L KIND S=N LENGTHS: T us"), as one row per (kind, S, lengths) and one column
per variant (best of its runs, us). A column NAME@L takes only NAME's runs at limit L (scans of one
build at several JAXPAGED_LIST_FREE_SEQS).

    python3 bench/experiments/scan_table.py LOG NAME[@L]...
"""

import collections
import re
import sys


def main(log: str, names: list[str]) -> None:
    t = collections.defaultdict(list)
    for line in open(log):
        m = re.match(r"(\w+) list_free_limit=(\S+) (\S+) S=(\d+) (\S+): ([\d.]+) us", line)
        if m:
            for column in (m.group(1), f"{m.group(1)}@{m.group(2)}"):
                t[(m.group(3), int(m.group(4)), m.group(5), column)].append(float(m.group(6)))
    print("kind  S      lengths " + "".join(f"{n:>10}" for n in names) + "  (us, best of runs)")
    for key in sorted({k[:3] for k in t}):
        best = (min(t[key + (n,)]) if t[key + (n,)] else 0.0 for n in names)
        print(f"{key[0]:5} {key[1]:5} {key[2]:7} " + "".join(f"{b:10.1f}" for b in best))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
