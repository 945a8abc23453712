"""Reads tools/mla_trace.cu's records (NOTES item 53) and prints the seesaw's timeline: for each
block, the median over steady-state pairs of each event's clock offset from warpgroup 0's pair
start (event 1), for both compute warpgroups and the loader's refills of the next pair.
Records of the wide fp8 kernel (ids >= 60, sm90/fp8_wide.cuh; --cache=fp8 or fp8math) get its own
report (wide_report): the same medians from warpgroup 0's event START (default 63, its pair start).
Records of the narrow fp8 kernel (ids 100-113, sm90/fp8_narrow.cuh; --cache=fp8 with <= 16 query
rows) get narrow_report: per compute warpgroup, its tiles' marks as offsets from the tile's wait
start (110), and its tile period (one tile of each two the block takes).
Every report starts with the SM clock during the traced call, where the records carry trace.cuh's
stamps (clock64 and the global timer at each role's start and end).

    python tools/mla_trace_report.py trace.bin [--wide] [--start=START]
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


# The wide fp8 kernel's marks (fp8_wide.cuh): 60-82 in each compute warpgroup (role 0 or 1, the
# same ids; a warpgroup's S^T tile is its own tile of the pair: warpgroup 0's tile 0, 1's tile 1),
# 90-95 the loader's (one thread; its tiles counted as the compute side pairs them).
WIDE_NAMES = {
    60: "start", 61: "sequence start", 62: "queries ready (Q^T barrier passed)", 63: "pair start",
    64: "S^T tile's full wait passed (halves: its first half)", 65: "S^T issued (its last k-step)", 66: "S^T done", 67: "vote barrier passed",
    68: "maxima exchanged (rescaling pairs only)", 69: "P^T stored", 70: "P^T barrier passed",
    71: "O^T tile 0: full wait passed", 72: "O^T tile 0 issued (its last k-step)", 73: "O^T tile 0 done",
    74: "tile 0's buffer handed back (sparse: O^T done; handed back before)",
    75: "O^T tile 1: full wait passed", 76: "O^T tile 1 issued (its last k-step)", 77: "O^T tile 1 done",
    78: "tile 1's buffer handed back (sparse: as 74)", 79: "epilogue start", 80: "sequence stored",
    81: "epilogue: sums met (barrier passed)", 82: "epilogue: half the rows stored",
    83: "kDF S^T: groups 0-1 added", 84: "kDF S^T: group 2 added", 85: "kDF S^T: group 3 added",
    90: "loader start", 91: "sequence start", 92: "tile 0: empty wait passed",
    93: "tile 0: copies issued",
    94: "tile 1: empty wait passed", 95: "tile 1: copies issued",
}
# The narrow fp8 kernel's marks (fp8_narrow.cuh): 100-113 in each compute warpgroup (role 0 or 1,
# the same ids; the warpgroups take the block's tiles in turn), the loader's 90-95 (fp8_ring.cuh).
NARROW_NAMES = {
    100: "start", 101: "sequence's queries ready", 110: "tile: full wait start", 102: "tile: full wait passed",
    103: "S^T done (promoted)", 104: "maxima barrier passed", 105: "P'^T written",
    106: "P'^T barrier passed", 107: "O^T first half done and promoted",
    108: "O^T second half issued, buffer handed back (tile's end)", 109: "sequence stored",
    111: "last tile's second half promoted (S^T's first issue next)", 112: "maxima read, corrections made",
    113: "P'^T stored, fence next",
}
NARROW_SEQ = (100, 101, 109)  # once a block or a sequence: not in the per-tile medians
WIDE_SEQ = (60, 61, 62, 79, 80, 81, 82, 90, 91)  # once a block or a sequence: not in the per-pair medians
WIDE_COMPUTE = [i for i in WIDE_NAMES if i < 90]  # the compute warpgroups' marks (the loader's are shared)


def spread(v):
    """A list of offsets as its median and its 10th and 90th percentiles, aligned for the tables."""
    return f"{statistics.median(v):7.0f}  (p10 {np.percentile(v, 10):7.0f}, p90 {np.percentile(v, 90):7.0f})"


def pairs(recs, start_id):
    """Splits (id, t) records into lists, one per pair, each starting at start_id."""
    out = []
    for i, t in recs:
        if i == start_id:
            out.append({})
        if out:
            out[-1].setdefault(i, t)
    return out


STAMPS = (120, 121)  # trace.cuh's clock64 / global-timer stamps at each role's start and end


def role_records(raw, blk, r):
    """Role r of block blk: all its (id, value) records, in order."""
    w = raw[blk, r]
    w = w[w != 0]
    return [(int(x >> np.uint64(48)), int(x & np.uint64(0xFFFFFFFFFFFF))) for x in w]


def records(raw, blk):
    """Each role's (id, clock) records of block blk, in order (the stamps left out)."""
    return [[(i, t) for i, t in role_records(raw, blk, r) if i not in STAMPS] for r in range(3)]


def clock_line(raw):
    """The SM clock over the traced call, from the roles' first and last stamps (clock64 and the global
    timer's ns, 48 bits each): cycles / ns per block and role, or None if no role has two stamps."""
    rates = []
    for blk in range(raw.shape[0]):
        for r in range(raw.shape[1]):
            recs = role_records(raw, blk, r)
            clk = [t for i, t in recs if i == STAMPS[0]]
            ns = [t for i, t in recs if i == STAMPS[1]]
            wrap = 1 << 48
            if len(clk) >= 2 and len(ns) >= 2 and (ns[-1] - ns[0]) % wrap > 0:
                d_ns = (ns[-1] - ns[0]) % wrap
                rates.append((blk, r, (clk[-1] - clk[0]) % wrap, d_ns))
    if not rates:
        return None
    ghz = [c / n for _, _, c, n in rates]
    b, r, c, n = rates[0]
    return (f"SM clock over the roles' runs (stamps, {len(rates)} roles): median {statistics.median(ghz):.2f} GHz "
            f"({min(ghz):.2f}-{max(ghz):.2f}); block {b} role {r}: {c} cycles in {n / 1e3:.1f} us")


def sequences(recs, seq_id, pair_id):
    """Splits a role's records into sequences (each from seq_id) of pairs (each from pair_id): a list
    per sequence of {id: first clock} per pair, and the sequence's own marks {id: clock}."""
    out = []
    for i, t in recs:
        if i == seq_id:
            out.append(([], {}))
        if not out:  # (the block's start mark, before its first sequence)
            continue
        seq_pairs, marks = out[-1]
        if i in WIDE_SEQ:
            marks.setdefault(i, t)
        elif i == pair_id:
            seq_pairs.append({i: t})
        elif seq_pairs:
            seq_pairs[-1].setdefault(i, t)
    return out


def wide_report(raw, start_id):
    """The wide fp8 kernel's timeline: per block, the median over steady pairs (a sequence's pairs
    but its first two and last two) of each event's offset from warpgroup 0's start_id in the pair,
    for both compute warpgroups and the loader's tiles of the next pair; the median pair period."""
    for blk in range(2):
        roles = records(raw, blk)
        if not roles[0]:
            print(f"block {blk}: no records")
            continue
        wg0, wg1, ld = sequences(roles[0], 61, 63), sequences(roles[1], 61, 63), sequences(roles[2], 91, 92)
        n_pairs = [sum(len(p) for p, _ in x) for x in (wg0, wg1, ld)]
        exch = sum(68 in q for p, _ in wg0 for q in p)
        steady = [(j, k) for j, (p, _) in enumerate(wg0) for k in range(2, len(p) - 2)]
        if not steady:  # (short sequences: every pair)
            steady = [(j, k) for j, (p, _) in enumerate(wg0) for k in range(len(p))]
        starts = {(j, k): q.get(start_id) for j, (p, _) in enumerate(wg0) for k, q in enumerate(p)}
        periods = [starts[j, k + 1] - starts[j, k] for j, k in steady
                   if (j, k + 1) in starts and starts[j, k] is not None and starts[j, k + 1] is not None]
        period = statistics.median(periods) if periods else float("nan")
        print(f"block {blk} (wide fp8 kernel): {len(wg0)} sequences, {n_pairs[0]} pairs (WG0), {n_pairs[1]} (WG1), "
              f"{n_pairs[2]} loader pairs; {len(steady)} steady; median pair period {period:.0f} cycles "
              f"({period / 2:.0f} a tile); maxima exchanged in {exch} of {n_pairs[0]} pairs")
        t0 = next((t for i, t in roles[0] if i == 60), roles[0][0][1])
        for j, (p, marks) in enumerate(wg0):  # a sequence's life, from warpgroup 0's start (60)
            ev = [(WIDE_NAMES[i], t - t0) for i, t in marks.items()]
            ev += [("first pair start", p[0][63] - t0), ("last pair start", p[-1][63] - t0)] if p else []
            print(f"  WG0 sequence {j} ({len(p)} pairs) from its start: "
                  + ", ".join(f"{name} {t}" for name, t in sorted(ev, key=lambda x: x[1])))
        by = {}  # (role, id) -> offsets from warpgroup 0's start_id, over the steady pairs
        for j, k in steady:
            ref = starts[j, k]
            if ref is None:
                continue
            for role, src, shift in ((0, wg0, 0), (1, wg1, 0), (2, ld, 1)):
                if j < len(src) and k + shift < len(src[j][0]):
                    for i, t in src[j][0][k + shift].items():
                        by.setdefault((role, i), []).append(t - ref)
        if not by:
            continue
        label = ("WG0", "WG1", "LD next pair:")
        print(f"  offsets from WG0's {start_id} ({WIDE_NAMES.get(start_id, '?')}), median (p10, p90) over the "
              f"steady pairs [pairs with the event]:")
        for key in sorted(by, key=lambda x: statistics.median(by[x])):
            v = by[key]
            print(f"  {spread(v)}  "
                  f"{key[1]:3d} {label[key[0]]} {WIDE_NAMES.get(key[1], '?')} [{len(v)}]")


def narrow_report(raw):
    """The narrow fp8 kernel's timeline: per block and compute warpgroup, the median (p10, p90) over
    its tiles (all but each warpgroup's first two and last two) of each mark's offset from the
    tile's wait start (110), and the median period between its tiles' wait starts. A warpgroup
    whose wait (110 -> 102) is short while its period is close to 110 -> 108 is bound by its own
    chain; a long wait means the bytes come late."""
    for blk in range(2):
        roles = records(raw, blk)
        for wg in range(2):
            tiles = []
            for i, t in roles[wg]:
                if i == 110:
                    tiles.append({})
                if tiles and i not in NARROW_SEQ:
                    tiles[-1].setdefault(i, t)
            if len(tiles) < 6:
                print(f"block {blk} WG{wg}: {len(tiles)} tiles, too few")
                continue
            steady = range(2, len(tiles) - 2)
            period = statistics.median(tiles[k + 1][110] - tiles[k][110] for k in steady)
            print(f"block {blk} WG{wg} (narrow fp8 kernel): {len(tiles)} tiles, median period {period:.0f} cycles "
                  f"(the block: {period / 2:.0f} a tile)")
            by = {}
            for k in steady:
                for i, t in tiles[k].items():
                    by.setdefault(i, []).append(t - tiles[k][110])
            for i in sorted(by, key=lambda i: statistics.median(by[i])):
                v = by[i]
                print(f"  {spread(v)}  "
                      f"{i:3d} {NARROW_NAMES.get(i, '?')}")


def main(path, wide=None, start_id=63):
    raw = np.fromfile(path, dtype=np.uint64).reshape(2, 3, -1)  # [block][role][record] (trace.cuh)
    line = clock_line(raw)
    if line:
        print(line)
    if bool(np.isin(raw >> np.uint64(48), np.array(list(NARROW_NAMES), dtype=np.uint64)).any()):
        narrow_report(raw)
        return
    if wide is None:  # the wide kernel's compute marks (WIDE_COMPUTE), the wgmma kernel's 1-54
        ids = raw >> np.uint64(48)
        wide = bool(np.isin(ids, np.array(WIDE_COMPUTE, dtype=np.uint64)).any())
    if wide:
        wide_report(raw, start_id)
        return
    for blk in range(2):
        roles = records(raw, blk)
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
            print(f"  {spread(v)}  "
                  f"{i:3d} {NAMES.get(i, '?')}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    start = next((int(a.split("=", 1)[1]) for a in flags if a.startswith("--start=")), 63)
    main(args[0], wide=True if "--wide" in flags else None, start_id=start)
