"""Reads tools/mla_trace.cu's records (NOTES item 53) and prints the seesaw's timeline: for each
block, the median over steady-state pairs of each event's clock offset from warpgroup 0's pair
start (event 1), for both compute warpgroups and the loader's refills of the next pair.

    python tools/mla_trace_report.py trace.bin
"""
import statistics
import sys

import numpy as np

NAMES = {
    1: "WG0 pair start (S0 done)", 2: "WG0 softmax0 done, m0 published", 3: "WG0 P0V0_L issued",
    4: "WG0 P0V0_L done", 5: "WG0 P1 barrier passed", 6: "WG0 P0 stored (arrive)",
    7: "WG0 P1V1_L issued", 8: "WG0 P1V1_L done", 9: "WG0 next S0 issued (buf0 landed)",
    10: "WG0 next S0 done", 11: "WG0 before P0V0_L's fence", 12: "WG0 P0V0_L's fence passed",
    13: "WG0 P0 rescaled (before its stores)",
    21: "WG1 pair start (S1 done)", 22: "WG1 tile max done", 23: "WG1 M0 barrier passed",
    24: "WG1 P1 stored, m1 published", 25: "WG1 P1V1_R issued", 26: "WG1 P0 barrier passed",
    27: "WG1 P0V0_R issued", 28: "WG1 P1V1_R done", 29: "WG1 P0V0_R done",
    30: "WG1 next S1 issued (buf1 landed)", 31: "WG1 next S1 done", 32: "WG1 P0V0_R's fence passed",
    40: "LD next pair: buf0 L refill", 41: "LD next pair: buf1 R refill", 42: "LD next pair: buf0 R refill",
    43: "LD next pair: buf0 rope refill", 44: "LD next pair: buf1 L refill", 45: "LD next pair: buf1 rope refill",
    50: "WG0 start", 51: "WG0 sequence start", 52: "WG0 queries landed", 53: "WG0 epilogue start",
    54: "WG0 sequence stored",
}


def pairs(recs, start_id):
    """Splits (id, t) records into lists, one per pair, each starting at start_id."""
    out = []
    for i, t in recs:
        if i == start_id:
            out.append({})
        if out:
            out[-1].setdefault(i, t)
    return out


def main(path):
    raw = np.fromfile(path, dtype=np.uint64).reshape(2, 3, -1)  # [block][role][record] (trace.cuh)
    for blk in range(2):
        roles = []
        for r in range(3):
            w = raw[blk, r]
            w = w[w != 0]
            roles.append([(int(x >> np.uint64(48)), int(x & np.uint64(0xFFFFFFFFFFFF))) for x in w])
        if not roles[0]:
            print(f"block {blk}: no records")
            continue
        p0, p1, ld = pairs(roles[0], 1), pairs(roles[1], 21), pairs(roles[2], 40)
        n = min(len(p0), len(p1))
        steady = range(2, n - 2)
        starts = [p0[k][1] for k in range(n)]
        period = statistics.median(starts[k + 1] - starts[k] for k in steady)
        print(f"block {blk}: {len(p0)} pairs (WG0), {len(p1)} (WG1), {len(ld)} loader iterations; "
              f"median pair period {period:.0f} cycles ({period / 2:.0f} a tile); first to last pair start "
              f"{starts[n - 1] - starts[0]} cycles")
        if any(i >= 50 for i, _ in roles[0]):  # the sequence marks (kernel.cuh: 50-54), in order
            t0 = next(t for i, t in roles[0] if i == 50)
            marks = [(i, t - t0) for i, t in roles[0] if i >= 50] + [(1, starts[0] - t0), (1, starts[n - 1] - t0)]
            print("  WG0 from its start: " + ", ".join(f"{NAMES[i]} {t}" for i, t in sorted(marks, key=lambda x: x[1]))
                  + f"; last record {roles[0][-1][1] - t0}")
        by = {}  # event id -> its offsets from WG0's pair start, over the steady pairs
        for k in steady:
            for src, shift in ((p0, 0), (p1, 0), (ld, 1)):
                if k + shift < len(src):
                    for i, t in src[k + shift].items():
                        by.setdefault(i, []).append(t - starts[k])
        for i in sorted(by, key=lambda i: statistics.median(by[i])):
            v = by[i]
            print(f"  {statistics.median(v):7.0f}  (p10 {np.percentile(v, 10):7.0f}, p90 {np.percentile(v, 90):7.0f})  "
                  f"{i:3d} {NAMES.get(i, '?')}")


if __name__ == "__main__":
    main(sys.argv[1])
