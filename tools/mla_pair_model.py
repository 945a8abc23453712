"""A model of the MLA Hopper kernel's seesaw (src/mla_decode/sm90/kernel.cuh), pair after pair, to
predict the pair period of a schedule change before building it (NOTES item 56).

    python3 tools/mla_pair_model.py [--rate 33] [--latency 500] [--delivery shared|fifo] [--pairs 40]

What is modelled:
- The tensor pipe runs the wgmma batches one after the other, in the order they are issued.
- The two compute warpgroups follow their step lists, with the delays between steps taken from
  the timeline probe's medians of HEAD at mla_h128_b64_ctx4k (bench/logs/
  2026-11-28_h100_session35_refill_trace_head.txt).
- The loader thread takes the pair's six refills in a fixed order. Each waits for its group's
  release, then asks for the group's boxes one after another.
- The bytes come into the SM first come, first served: a request lands `latency` cycles after it
  is asked for at the earliest, and no sooner than the requests ahead of it have landed, plus
  its bytes at `rate` bytes a cycle.
- S waits for each of its tile's groups before issuing that group's products.

Variants:
- head: today's kernel.
- buf0_first: the loader refills buffer 0's groups first (measured 7118 cycles against HEAD's
  6918: not kept).
- rq8: FlashMLA's Q rope in registers. Each tile's rope block is free right after its S, refilled
  first, and read first by the next S; P lives elsewhere.
- rq8_blocks: rq8 with S issued per 8 KiB column block as it lands (9 barriers, FlashMLA's).
- direct: the refill issued by the releasing thread itself, with no loader hop of ~150 cycles.

It prints each variant's steady-state pair period in cycles. The model has two fitted constants,
rate and latency (and a choice of delivery, --delivery), set so that head gives the measured
period.

**It fails its check against two measured changes, so do not trust its predictions.** With head
fitted (shared delivery at 33 B a cycle and 500 cycles: 6861, against the measured 6737-6918):
- buf0_first: predicted +8 to +11%. Measured +2.9% in block 0's period and level in the per-layer
  context scan (session 35).
- Earlier requests (direct here; session 32's sleeping waits sent them ~200 cycles earlier):
  predicted -2%. Measured level: the next S0's bytes landed 43 cycles earlier.

So the real delivery depends less on when one SM asks than a per-SM queue does. Item 54 points at
limits shared by all SMs instead: the L2-to-SM traffic is twice the DRAM bytes at h128. Its rq8
prediction (-5 to -8%) is therefore an upper bound at best. Compute alone (infinite rate, no
latency) gives 4433 cycles a pair, against 6602 measured with every tile in L2 (item 54 e).
"""

import argparse

KIB = 1024
GROUP_BYTES = {"L": 32 * KIB, "R": 32 * KIB, "rope": 8 * KIB}
GROUP_BLOCKS = {"L": 4, "R": 4, "rope": 1}  # 64-column blocks (4 wgmma m64n64k16 each in S)

# Step costs in cycles, from the probe's medians (HEAD, b64 ctx4k). Each is the time a warpgroup
# spends between two marks, less any wait the mark shows.
S_BLOCK = 36         # one column block of S (4 wgmma m64n64k16), tensor pipe
PV = 490             # O_half += P V_half (4 wgmma m64n256k16), tensor pipe
WG0_SOFTMAX = 706    # S0 done -> m0 published
WG0_TO_PV0 = 574     # m0 published -> P0 V0_L issued (rescale, scale O, fences)
WG0_P0_STORE = 640   # P1 barrier passed -> P0 rescaled, stored, P0 barrier arrived
WG0_TO_PV1 = 740     # P0 barrier arrived -> P1 V1_L issued (scale O to m1, fences)
WG1_TILE_MAX = 684   # S1 done -> its tile max
WG1_SOFTMAX = 634    # m0 known -> P1 stored, m1 published
WG1_TO_PV1 = 568     # m1 published -> P1 V1_R issued
WG1_TO_PV0 = 575     # P0 barrier passed -> P0 V0_R issued
LOADER_HOP = 150     # release -> the loader thread's request (empty barrier, wake-up)
BOX_ISSUE = 70       # one TMA box's issue in the loader thread


def fifo_landing(requests, rate, latency):
    """Landing times of (time asked, bytes) requests served first come, first served."""
    free, out = -1e9, []
    for t, nbytes in requests:
        free = max(t + latency, free) + nbytes / rate
        out.append(free)
    return out


def shared_landing(requests, rate, latency):
    """Landing times of (time asked, bytes) requests sharing the rate equally among those in
    flight (each in flight from `latency` after it is asked for)."""
    arrive = [t + latency for t, _ in requests]
    left = [float(b) for _, b in requests]
    out = [None] * len(requests)
    t = min(arrive)
    while any(x is None for x in out):
        active = [i for i in range(len(requests)) if out[i] is None and arrive[i] <= t + 1e-9]
        pending = [arrive[i] for i in range(len(requests)) if out[i] is None and arrive[i] > t + 1e-9]
        if not active:
            t = min(pending)
            continue
        share = rate / len(active)
        step = min(left[i] for i in active) / share
        if pending:
            step = min(step, min(pending) - t)
        for i in active:
            left[i] -= share * step
        t += step
        for i in active:
            if left[i] <= 1e-6:
                out[i] = t
    return out


class Pipe:
    """The tensor pipe: jobs in issue order."""

    def __init__(self):
        self.free = -1e9

    def run(self, t_issue, dur):
        self.free = max(t_issue, self.free) + dur
        return self.free


def simulate(variant, rate, latency, pairs, delivery="shared"):
    rq8 = variant.startswith("rq8")
    per_block = variant == "rq8_blocks"
    hop = 0 if variant == "direct" else LOADER_HOP
    # The order the loader refills a pair's groups in, and the order S reads a buffer's groups.
    if variant == "buf0_first":
        refill = [(0, "L"), (0, "R"), (0, "rope"), (1, "R"), (1, "L"), (1, "rope")]
    elif rq8:
        refill = [(0, "rope"), (1, "rope"), (0, "L"), (1, "R"), (0, "R"), (1, "L")]
    else:
        refill = [(0, "L"), (1, "R"), (0, "R"), (0, "rope"), (1, "L"), (1, "rope")]
    read = {0: ["rope", "L", "R"] if rq8 else ["L", "R", "rope"],
            1: ["rope", "R", "L"] if rq8 else ["R", "L", "rope"]}

    pipe = Pipe()
    landing = shared_landing if delivery == "shared" else fifo_landing
    # landed[(buf, g)]: when the group's bytes are in; per_block: a list per column block.
    landed = {(b, g): [0.0] * GROUP_BLOCKS[g] for b in (0, 1) for g in GROUP_BYTES}

    def s_jobs(buf, t):
        """S of the tile in buf issued from t on, each group (or block) once landed: its wgmma
        batches as (issue time, duration)."""
        jobs = []
        for g in read[buf]:
            for land in landed[(buf, g)] if per_block else [max(landed[(buf, g)])]:
                t = max(t, land)
                jobs.append((t, S_BLOCK * (1 if per_block else GROUP_BLOCKS[g])))
        return jobs

    def run_s(t0, t1):
        """Both warpgroups' S (issued from t0 and t1), through the pipe in issue order; -> done times."""
        jobs = sorted([(t, d, 0) for t, d in s_jobs(0, t0)] + [(t, d, 1) for t, d in s_jobs(1, t1)])
        done = [t0, t1]
        for t, d, w in jobs:
            done[w] = pipe.run(t, d)
        return done

    s0_done, s1_done = run_s(0.0, 0.0)
    starts = []
    for _ in range(pairs):
        starts.append(s0_done)
        release = {}
        if rq8:  # the tiles' rope blocks are free once their S is done
            release[(0, "rope")], release[(1, "rope")] = s0_done, s1_done
        # warpgroup 0, first half
        m0 = s0_done + WG0_SOFTMAX
        pv0_l = pipe.run(m0 + WG0_TO_PV0, PV)
        release[(0, "L")] = pv0_l
        # warpgroup 1, first half
        m1 = max(s1_done + WG1_TILE_MAX, m0) + WG1_SOFTMAX
        pv1_r = pipe.run(m1 + WG1_TO_PV1, PV)
        # warpgroup 0 hands P0 over
        p0 = max(pv0_l, m1) + WG0_P0_STORE
        # warpgroup 1's P0 V0_R, warpgroup 0's P1 V1_L (the pipe takes them in issue order)
        t_pv0_r = p0 + WG1_TO_PV0
        t_pv1_l = p0 + WG0_TO_PV1
        if t_pv0_r <= t_pv1_l:
            pv0_r = pipe.run(t_pv0_r, PV)
            pv1_l = pipe.run(t_pv1_l, PV)
        else:
            pv1_l = pipe.run(t_pv1_l, PV)
            pv0_r = pipe.run(t_pv0_r, PV)
        release[(1, "R")] = pv1_r
        release[(0, "R")] = pv0_r
        release[(1, "L")] = pv1_l
        if not rq8:  # P was over the rope blocks: free after the products that read P
            release[(0, "rope")], release[(1, "rope")] = pv0_r, pv1_l
        # the loader: the six refills in its order, each box behind the previous one's issue
        # (a pair's requests land before the next pair's are asked for: each pair is its own batch)
        t_loader, asked = 0.0, []
        for buf, g in refill:
            t_loader = max(t_loader, release[(buf, g)] + hop)
            for _ in range(GROUP_BLOCKS[g]):
                t_loader += BOX_ISSUE
                asked.append(((buf, g), t_loader, GROUP_BYTES[g] / GROUP_BLOCKS[g]))
        lands = landing([(t, b) for _, t, b in asked], rate, latency)
        for key in landed:
            landed[key] = [land for (k, _, _), land in zip(asked, lands) if k == key]
        # the next pair's S (warpgroup 0 after its P1 V1_L, warpgroup 1 after its P0 V0_R)
        s0_done, s1_done = run_s(pv1_l, pv0_r)
    steady = starts[len(starts) // 2:]
    return (steady[-1] - steady[0]) / (len(steady) - 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=33.0, help="bytes a cycle into one SM")
    parser.add_argument("--latency", type=float, default=500.0, help="cycles from request to first byte")
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--delivery", choices=("shared", "fifo"), default="shared",
                        help="requests in flight share the rate, or are served one after another")
    args = parser.parse_args()
    head = simulate("head", args.rate, args.latency, args.pairs, args.delivery)
    print(f"{args.delivery} delivery, rate {args.rate} B/cycle, latency {args.latency} cycles")
    for v in ("head", "buf0_first", "direct", "rq8", "rq8_blocks"):
        period = simulate(v, args.rate, args.latency, args.pairs, args.delivery)
        print(f"  {v:12s} {period:7.0f} cycles a pair ({period / head - 1:+.1%} against head)")


if __name__ == "__main__":
    main()
