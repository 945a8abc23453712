"""Protocol model of the staggered wide MLA kernel (bench/experiments/2026-11-26_mla_wide_staggered.patch,
NOTES item 49 h): the two compute warpgroups and the loader as Python generators under random
interleavings, over sequences of 0-7 tiles. Checks deadlock, a second bar.arrive on a named barrier
before its round completes, stale reads of P^T slots / rescale factors / running maxima / raw buffers,
and over-counted empty barriers. `python3 tools/wide_stagger_protocol_model.py [A|B]` prints "failures 0"
(S = raw buffers, SLOTS = P^T slots at the top: 2 slots make it report overwrites, 1 buffer a deadlock).
Order A is the staggered patch's, B the order-B patch's (O^T(t - 1) before softmax(t)). Written by a
review helper in session 28 (order B added after); no GPU needed."""
import random, itertools, sys
S=3; SLOTS=3
ORDER = sys.argv[1] if len(sys.argv) > 1 else 'A'  # 'A': O^T(t - 1), O^T(t) after softmax(t); 'B': O^T(t - 1) before it
class Dead(Exception): pass
def run(seqs, seed):
    rng=random.Random(seed)
    # state
    nb={}  # id -> [count, gen, arrivers(set)]
    def nb_get(i): return nb.setdefault(i,[0,0,[]])
    full=[0]*S; empty=[0]*S  # completed phases count
    empty_cnt=[0]*S
    buf=[None]*S   # (seq, tile) loaded
    slot=[None]*SLOTS  # (seq, tile) P^T/corr
    slot_readers={}  # (seq,tile)-> set of wgs that did ot
    sM=[None,None]  # (seq, 'after tile k')
    err=[]
    def loader():
        use=0
        for si,n in enumerate(seqs):
            for u in range(n):
                st=use%S; k=use//S
                while empty[st] < k: yield 'wait'
                # refilling: all prior users must be done
                buf[st]=(si,u)
                full[st]+=1
                use+=1
    def nb_arrive(i, who):
        c=nb_get(i)
        if who in c[2]: err.append(f'double arrive id {i} by {who}')
        c[2].append(who); c[0]+=128
        if c[0]==256: c[0]=0; c[1]+=1; c[2]=[]
        return c[1] if c[0]==0 else c[1]+1  # generation to be completed
    def nb_sync(i, who):
        target=nb_arrive(i, who)
        while nb_get(i)[1] < target: yield 'wait'
    def wg(w):
        use=0
        for si,n in enumerate(seqs):
            yield from nb_sync(1,w)
            if w==0: sM[0]=(si,-1)
            yield from nb_sync(1,w)
            use0=use
            def st_of(x): return (use0+x)%S
            def ph_of(x): return (use0+x)//S
            def ot(x):
                if slot[x%SLOTS]!=(si,x): err.append(f'ot slot stale {slot[x%SLOTS]} want {(si,x)}')
                s=st_of(x)
                while full[s] < ph_of(x)+1: yield 'wait'
                if buf[s]!=(si,x): err.append(f'ot buf stale {buf[s]} want {(si,x)}')
                yield 'ot'
                if buf[s]!=(si,x): err.append(f'ot buf changed under read')
                if slot[x%SLOTS]!=(si,x): err.append(f'ot slot changed under read')
                slot_readers.setdefault((si,x),set()).add(w)
                empty_cnt[s]+=4
                if empty_cnt[s]==8: empty_cnt[s]=0; empty[s]+=1
                elif empty_cnt[s]>8: err.append('empty overflow')
            t=w
            while True:
                own=t<n; prev=t>=1 and t-1<n
                if not own and not prev: break
                if own:
                    s=st_of(t)
                    while full[s] < ph_of(t)+1: yield 'wait'
                    if buf[s]!=(si,t): err.append(f'st buf {s} holds {buf[s]} want {(si,t)}')
                    yield 'st'
                if prev:
                    yield from nb_sync(4+(1-w), w)
                    if ORDER=='B': yield from ot(t-1)
                if own:
                    # softmax reads
                    if sM[t&1]!=(si,t-1): err.append(f'm_in stale {sM[t&1]} for {(si,t)}')
                    if t>=1 and slot[(t-1)%SLOTS]!=(si,t-1): err.append(f'prev corr stale')
                    # writes
                    old=slot[t%SLOTS]
                    if old is not None and old[0]==si and slot_readers.get(old,set())!={0,1}:
                        err.append(f'slot {t%SLOTS} overwritten ({old}) before both O^T; readers {slot_readers.get(old)}')
                    slot[t%SLOTS]=(si,t)
                    yield 'sm'
                    sM[(t+1)&1]=(si,t)
                    s=st_of(t)
                    if buf[s]!=(si,t): err.append('zeroing wrong buf')
                    nb_arrive(4+w, w)
                else:
                    if slot[(t-1)%SLOTS]!=(si,t-1): err.append('last corr stale')
                if ORDER=='A':
                    for x in range((t-1) if prev else t, (t if own else t-1)+1):
                        yield from ot(x)
                elif own:
                    yield from ot(t)
                t+=2
            use+=n
            yield from nb_sync(1,w)
            # sSum over slot 0: all O^T done?
            for k,v in slot_readers.items():
                pass
            yield from nb_sync(1,w)
            if w==0 and sM[n&1]!=(si,n-1): err.append(f'lse maxima stale {sM[n&1]} want {(si,n-1)}')
    procs={'L':loader(),'0':wg(0),'1':wg(1)}
    stuck=0
    while procs:
        k=rng.choice(list(procs))
        try:
            r=next(procs[k])
        except StopIteration:
            del procs[k]; stuck=0; continue
        if r=='wait': stuck+=1
        else: stuck=0
        if stuck>2000: raise Dead(f'deadlock seqs={seqs} procs={list(procs)}')
    return err
bad=0
for trial in range(3000):
    rng=random.Random(trial)
    seqs=[rng.choice([0,1,2,3,4,5,6,7]) for _ in range(rng.randint(1,4))]
    try:
        e=run(seqs, trial)
    except Dead as d:
        print(d); bad+=1; continue
    if e: print(seqs, e[:3]); bad+=1
print('failures', bad)
