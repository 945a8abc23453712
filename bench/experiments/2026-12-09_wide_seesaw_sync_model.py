# Review aid for 2026-12-09_wide_seesaw.patch (see 2026-12-09_wide_seesaw_review.md): a model of the
# kSee schedule's synchronisation - WG0, WG1 (one agent each) and the TMA loader thread - with the
# patch's named barriers 1, 4, 5, 6, 7 (arrive/sync, duplicate-arrival and leftover checks), the
# full halves and split empties (count 8, parity waits flagged when the barrier is not in
# {n, n+1} / {n-1, n} phases, arrivals checked against the phase they are meant for), and
# vector-clock race detection on tM/tE/tChg slots, P^T slots, raw buffer halves and sBad. Random
# interleavings over tile counts 0-9, cut pieces (begin > 0, end < tiles) and multi-sequence blocks.
# Each op's position follows fp8_wide.cuh as patched (line refs in the review). python3 this_file
# Model of the patched kSee schedule: WG0, WG1 (one agent each), loader (one agent).
# Named barriers: directed (256) and Both (256); mbarriers: full halves, split empties (count 8).
# Vector-clock race detection on shared locations. Random interleavings.
import random, sys
ST = 3
class Err(Exception): pass
def join(a, b): return [max(x, y) for x, y in zip(a, b)]
def hb(c_writer_at, agent, c_reader): return c_writer_at[agent] <= c_reader[agent]

class Sim:
    def __init__(s, seqs, rng, kdf=True):
        s.seqs = seqs; s.rng = rng; s.kdf = kdf
        s.vc = [[0]*3 for _ in range(3)]
        for a in range(3): s.vc[a][a] = 1
        s.nb = {}   # id -> dict(count, arrived list, gen, clock)
        s.mb = {}   # name -> dict(count, pend, done, clocks[])
        for i in range(ST):
            s.mb[('full', 0, i)] = dict(count=1, pend=0, done=0, clocks=[])
            s.mb[('full', 1, i)] = dict(count=1, pend=0, done=0, clocks=[])
            s.mb[('empty', 0, i)] = dict(count=8, pend=0, done=0, clocks=[])
            s.mb[('empty', 1, i)] = dict(count=8, pend=0, done=0, clocks=[])
        s.mem = {}  # loc -> (last write (agent, clock), reads [(agent, clock)])
    def tick(s, a): s.vc[a][a] += 1
    def access(s, a, loc, w, what=''):
        c = list(s.vc[a])
        lw, rds = s.mem.get(loc, (None, []))
        if lw and lw[0] != a and not hb(lw[1], lw[0], c):
            raise Err(f'race: {"write" if w else "read"} of {loc} by {a} {what} vs write by {lw[0]} {lw[2]}')
        if loc[0] == 'tM' and len(loc) == 2:
            for part in (0, 1): s.access(a, (loc[0], loc[1], part), w, what)
            return
        if w:
            for (ra, rc, rw) in rds:
                if ra != a and not hb(rc, ra, c):
                    raise Err(f'race: write of {loc} by {a} {what} vs read by {ra} {rw}')
            s.mem[loc] = ((a, c, what), [])
        else:
            rds.append((a, c, what)); s.mem[loc] = (lw, rds)
        s.tick(a)

def wg_prog(S, w):
    # yields ops; ops: ('bsync',id,cnt) ('barr',id,cnt) ('mwait',key,phase_idx_to_complete) ('marr',key,n,phase_idx) ('r',loc,what) ('w',loc,what)
    use = 0
    for (seqlen, begin, end) in S.seqs:
        yield ('bsync', 1, 256)
        if True:  # prologue writes slots 2,3
            yield ('w', ('tM', 2, w), 'prologue'); yield ('w', ('tM', 3, w), 'prologue')
            if w == 0: yield ('w', ('tChg', 2), 'prologue'); yield ('w', ('tChg', 3), 'prologue'); yield ('w', ('tE', 3), 'prologue')
        yield ('bsync', 1, 256)
        u = begin
        while u < end:
            has1 = u + 1 < end; own = w == 0 or has1; nxt = u + 2 < end
            st = [use % ST, (use + 1) % ST]; ph = [use // ST, (use + 1) // ST]
            mine = u + w
            s_a = (u - begin) & 3; s_mine = s_a + w; s_prev = (s_mine + 3) & 3; s_lastown = (s_mine + 2) & 3
            if own:
                yield ('mwait', ('full', 0, st[w]), ph[w])
                yield ('r', ('sBad', st[w]), 'S^T sBad')
                yield ('r', ('raw', 0, st[w]), 'S^T first half')
                yield ('mwait', ('full', 1, st[w]), ph[w])
                yield ('r', ('raw', 1, st[w]), 'S^T second half')
            if w == 1 and own:
                yield ('bsync', 4, 256)
            if own:
                yield ('r', ('tM', s_prev), f'm_prev tile {mine}')
                if S.kdf: yield ('r', ('raw', 0, st[w]), 'token_scales (sGmax)')
                # vote (local)
                if S.kdf:
                    yield ('r', ('tE', s_prev), 'e_prev'); yield ('w', ('tE', s_mine), f'E tile {mine}')
                yield ('w', ('tM', s_mine), f'state tile {mine}'); yield ('w', ('tChg', s_mine), f'chg tile {mine}')
                if w == 0 and has1: yield ('barr', 4, 256)
                yield ('r', ('tChg', s_prev), 'l chg'); yield ('r', ('tM', s_lastown), 'l lastown')
            if w == 0 and u > begin:
                yield ('bsync', 7, 256)
            if own:
                if S.kdf: yield ('r', ('raw', 0, st[w]), 'token_scales P^T')
                yield ('r', ('tM', s_prev), 'P formation m_prev'); yield ('r', ('tM', s_mine), 'P formation m_cur')
                yield ('w', ('Pt', w), f'P^T tile {mine}')
                if mine == seqlen - 1 and seqlen * 64 % 64 == 0 and S.rng.random() < 1.0:
                    # last tile of sequence: zero rows (model as write of both halves; may be partial)
                    yield ('w', ('raw', 0, st[w]), 'zero rows'); yield ('w', ('raw', 1, st[w]), 'zero rows')
                yield ('marr', ('empty', 1 - w, st[w]), 4, ph[w])
                yield ('barr', 5 + w, 256)
            # see_tile_scale(0)
            def scale(t):
                if t != w:
                    yield ('bsync', 5 + t, 256)
                s_t = s_a + t; s_tp = (s_t + 3) & 3
                yield ('r', ('tChg', s_t), f'scale chg {u+t}'); yield ('r', ('tM', s_tp), f'scale mold {u+t}'); yield ('r', ('tM', s_t), f'scale mnew {u+t}')
                if S.kdf: yield ('r', ('tE', s_tp), 'scale E'); yield ('r', ('tE', s_t), 'scale E')
            yield from scale(0)
            for t in range(2 if has1 else 1):
                if t == 1: yield from scale(1)
                if t != w:
                    yield ('mwait', ('full', 0, st[t]), ph[t]); yield ('mwait', ('full', 1, st[t]), ph[t])
                    yield ('marr', ('empty', 1 - w, st[t]), 4, ph[t])
                yield ('r', ('Pt', t), f'O^T P tile {u+t}')
                yield ('r', ('raw', w, st[t]), f'O^T half {w} tile {u+t}')
                yield ('marr', ('empty', w, st[t]), 4, ph[t])
                if w == 1 and t == 0 and nxt: yield ('barr', 7, 256)
            u += 2; use += 2
        if end - begin > 0 and (end - begin) & 1: use -= 1
        n = end - begin; s_last = (n - 1) & 3; s_own = (n - 1 - ((n - 1 - w) & 1)) & 3
        yield ('r', ('tM', s_last), 'epi'); yield ('r', ('tM', s_own), 'epi own')
        if S.kdf: yield ('r', ('tE', s_last), 'epi E')
        yield ('bsync', 1, 256)
        if w == 0: yield ('r', ('tM', s_last), 'epi lse')
        yield ('bsync', 1, 256)

def loader_prog(S):
    use = 0
    for (seqlen, begin, end) in S.seqs:
        for u in range(begin, end):
            stage = use % ST; n = use // ST
            yield ('lwait', ('empty', 0, stage), n)
            yield ('w', ('sBad', stage), f'loader tile {use}')
            yield ('w', ('raw', 0, stage), f'TMA first half use {use}')
            yield ('marr', ('full', 0, stage), 1, n)
            yield ('lwait', ('empty', 1, stage), n)
            yield ('w', ('raw', 1, stage), f'TMA second half use {use}')
            yield ('marr', ('full', 1, stage), 1, n)
            use += 1

def run(seqs, seed, kdf=True):
    rng = random.Random(seed)
    S = Sim(seqs, rng, kdf)
    progs = [wg_prog(S, 0), wg_prog(S, 1), loader_prog(S)]
    cur = [None, None, None]; done = [False]*3
    waiting = [None]*3  # bsync state: (id, gen)
    for a in range(3):
        try: cur[a] = next(progs[a])
        except StopIteration: done[a] = True
    steps = 0
    while not all(done):
        steps += 1
        runnable = []
        for a in range(3):
            if done[a]: continue
            op = cur[a]
            k = op[0]
            if k == 'bsync' and waiting[a] is not None:
                bid, gen = waiting[a]
                if S.nb[bid]['gen'] == gen: continue
            if k == 'mwait' or k == 'lwait':
                b = S.mb[op[1]]; n = op[2]
                if k == 'mwait':  # wait for completion of phase n: parity n&1
                    if b['done'] not in (n, n + 1): raise Err(f'ambiguous full wait {op} done={b["done"]} agent {a}')
                    if not ((b['done'] & 1) != (n & 1)): continue
                else:  # loader: wait phase n-1 complete, parity ((n&1)^1)
                    if b['done'] not in (n - 1, n): raise Err(f'ambiguous empty wait {op} done={b["done"]}')
                    if not ((b['done'] & 1) != ((n & 1) ^ 1)): continue
            runnable.append(a)
        if not runnable:
            raise Err('DEADLOCK: ' + ' | '.join(f'{a}:{cur[a]}' for a in range(3) if not done[a]))
        a = rng.choice(runnable)
        op = cur[a]; k = op[0]
        advance = True
        if k in ('bsync', 'barr'):
            bid, cnt = op[1], op[2]
            if k == 'bsync' and waiting[a] is not None:
                waiting[a] = None  # released
            else:
                b = S.nb.setdefault(bid, dict(count=cnt, arr=[], gen=0, clock=[0]*3))
                if b['count'] != cnt: raise Err(f'barrier {bid} count mismatch')
                if any(x[0] == a for x in b['arr']): raise Err(f'barrier {bid}: agent {a} arrives twice in one phase (op {op})')
                b['arr'].append((a, list(S.vc[a]), k))
                S.tick(a)
                if 128 * len(b['arr']) == cnt:
                    clk = [0]*3
                    for x in b['arr']: clk = join(clk, x[1])
                    for x in b['arr']:
                        if x[2] == 'bsync': S.vc[x[0]] = join(S.vc[x[0]], clk)
                    b['arr'] = []; b['gen'] += 1
                    if k == 'bsync': advance = True
                elif k == 'bsync':
                    waiting[a] = (bid, b['gen']); advance = False
                if 128 * len(b['arr']) > cnt: raise Err('overfull')
        elif k in ('mwait', 'lwait'):
            b = S.mb[op[1]]
            if b['done'] > 0: S.vc[a] = join(S.vc[a], b['clocks'][b['done'] - 1])
            S.tick(a)
        elif k == 'marr':
            b = S.mb[op[1]]
            if b['done'] != op[3]: raise Err(f'arrival on {op[1]} for phase {op[3]} but barrier at phase {b["done"]} (agent {a})')
            b['pend'] += op[2]
            b.setdefault('clk', [0]*3); b['clk'] = join(b['clk'], S.vc[a])
            S.tick(a)
            if b['pend'] == b['count']:
                b['clocks'].append(b['clk']); b['clk'] = [0]*3; b['pend'] = 0; b['done'] += 1
            elif b['pend'] > b['count']: raise Err('mbar overfull')
        elif k in ('r', 'w'):
            S.access(a, op[1], k == 'w', op[2])
        if advance:
            try: cur[a] = next(progs[a])
            except StopIteration: done[a] = True
    # end checks: named barriers empty, mbarrier pend 0
    for bid, b in S.nb.items():
        if b['arr']: raise Err(f'leftover arrivals on barrier {bid}: {[x[0] for x in b["arr"]]}')
    for key, b in S.mb.items():
        if b['pend']: raise Err(f'leftover mbar arrivals on {key}: {b["pend"]}')
    return steps

if __name__ == '__main__':
    configs = []
    for n in range(0, 10):
        configs.append([(n, 0, n)])
    # cut pieces and multi-seq blocks
    configs += [[(9, 3, 9)], [(9, 4, 9)], [(9, 0, 5)], [(9, 3, 6)], [(9, 3, 4)],
                [(3, 0, 3), (1, 0, 1), (0, 0, 0), (4, 0, 4), (5, 0, 5)],
                [(7, 5, 7), (2, 0, 2), (3, 0, 3), (6, 0, 1)],
                [(1, 0, 1)] * 5, [(2, 0, 2)] * 5, [(5, 0, 5), (5, 0, 5), (8, 0, 8)],
                [(11, 1, 11), (3, 0, 3), (10, 0, 7)]]
    bad = 0
    for ci, cfg in enumerate(configs):
        for seed in range(300):
            try: run(cfg, seed, kdf=True)
            except Err as e:
                print('config', cfg, 'seed', seed, '->', e); bad += 1; break
    print('done, failing configs:', bad)
