"""A Python model of the MLA Hopper path's work split (src/mla_decode/schedule.cu's
mla_schedule_kernel, and the attention kernel's walk: part_first..part_last with
mla_piece_tiles), for checking schedule changes without a GPU: every tile of every sequence is
processed exactly once, the partitions that walk a sequence are seq_first_part .. + seq_pieces, a
cut sequence is its partitions' first or last (the merge's slot rule), no two sequences write one
field, and it counts empty pieces (a partition walking a sequence with tiles but none of them).
`patched=True` models main since 316e5a1 (the schedule without empty pieces); `patched=False`
the schedule before it.

    python tools/mla_schedule_model.py
"""
import random
SEQ = 2
def schedule(tiles, num_parts, patched, seq_cost=SEQ):
    costs = [t + seq_cost for t in tiles]
    total = sum(costs)
    target = -(-total // num_parts)
    if min(costs) == max(costs):
        whole = -(-target // costs[0]) * costs[0]
        if 8 * whole <= 9 * target: target = whole
    part_first = [0] * num_parts; part_last = [-1] * num_parts
    seq_start, seq_first, seq_pieces = [], [], []
    start = 0
    writes = {}
    for b, cost in enumerate(costs):
        if patched:
            fixed_end = start + seq_cost if cost > seq_cost else start
            first = fixed_end // target
            for part in range(start // target, first):
                v = b - 1 if part * target < start else -1
                writes.setdefault(('last', part), []).append(v); part_last[part] = v
        else:
            first = start // target
        last = (start + cost - 1) // target
        seq_start.append(start); seq_first.append(first); seq_pieces.append(last - first + 1)
        for part in range(first, last + 1):
            if part * target >= start:
                writes.setdefault(('first', part), []).append(b); part_first[part] = b
            last_pos = min((part + 1) * target, total) - 1
            if last_pos < start + cost:
                writes.setdefault(('last', part), []).append(b); part_last[part] = b
        start += cost
    conflicts = {k: v for k, v in writes.items() if len(set(v)) > 1}
    return dict(target=target, total=total, part_first=part_first, part_last=part_last, seq_start=seq_start,
                seq_first=seq_first, seq_pieces=seq_pieces, conflicts=conflicts)

def piece_tiles(s, part, b, tiles, seq_cost=SEQ):
    target, total = s['target'], s['total']
    ftp = s['seq_start'][b] + seq_cost
    sb, se = part * target, min(total, (part + 1) * target)
    cl = lambda pos: max(0, min(tiles, pos - ftp))
    return cl(sb), cl(se)

def check(tiles, num_parts, patched):
    s = schedule(tiles, num_parts, patched)
    assert not s['conflicts'], s['conflicts']
    covered = [[0] * t for t in tiles]
    walked = {b: [] for b in range(len(tiles))}
    empty = 0
    for part in range(num_parts):
        fb, lb = max(s['part_first'][part], 0), min(s['part_last'][part], len(tiles) - 1)
        for b in range(fb, lb + 1):
            lo, hi = piece_tiles(s, part, b, tiles[b])
            walked[b].append(part)
            if lo >= hi and tiles[b] > 0: empty += 1
            for u in range(lo, hi): covered[b][u] += 1
    for b, t in enumerate(tiles):
        assert all(c == 1 for c in covered[b]), (b, covered[b])
        parts = walked[b]
        assert parts, ("sequence never walked", b)
        assert parts == list(range(s['seq_first'][b], s['seq_first'][b] + s['seq_pieces'][b])), (b, parts, s['seq_first'][b], s['seq_pieces'][b])
        # slot rule: a partition has at most two cut sequences, its first and its last
        if s['seq_pieces'][b] > 1:
            for part in parts:
                assert s['part_first'][part] == b or s['part_last'][part] == b
    return empty, sum(s['seq_pieces'])

random.seed(0)
for patched in (False, True):
    tot_empty = 0
    for trial in range(20000):
        B = random.choice([1, 2, 3, 4, 5, 8, 17, 64, 130])
        kind = random.random()
        if kind < 0.3: tiles = [random.choice([0, 1, 2, 64])] * B
        elif kind < 0.6: tiles = [random.randint(0, 5) for _ in range(B)]
        else: tiles = [random.randint(0, 600) for _ in range(B)]
        parts = random.choice([1, 2, 3, 7, 66, 132, 160])
        e, _ = check(tiles, parts, patched)
        tot_empty += e
    print("main (316e5a1+)" if patched else "before 316e5a1", "empty pieces over all trials:", tot_empty)
print("B=4 ctx4k:", check([64] * 4, 66, False), check([64] * 4, 66, True))
