"""Checks the order of bench/experiments/2026-11-29_ds_scale_pairs.patch's scale pairs (NOTES item 69 g;
no GPU): every pair the O^T side of the wide kernel's kDs path reads from S::kSc (its thread c of
k-step s2 of group gi of warpgroup wg: tokens t, t + 1 and t + 8, t + 9 of group 2 wg + gi / 4,
t = 32 (gi % 2) + 16 s2 + 2c) is the pair the writers (thread tw: pair tw / 4, group tw % 4)
stored there, and the writers fill the 128 places once each.

    python tools/wide_scale_pairs_check.py
"""


def wide_scale_pair_at(grp: int, pp: int) -> int:  # (the patch's function, as written there)
    return grp * 32 + (pp // 16) * 16 + (pp % 4) * 4 + (pp % 16) // 4


def main() -> None:
    held = {}
    for tw in range(128):
        at = wide_scale_pair_at(tw % 4, tw // 4)
        assert at not in held, at
        held[at] = (tw % 4, tw // 4)
    assert sorted(held) == list(range(128))
    for wg in range(2):
        for gi in range(8):
            for c in range(4):
                grp = 2 * wg + gi // 4
                at = wide_scale_pair_at(grp, 16 * (gi % 2) + c)
                assert at % 4 == 0  # (a 16-byte load of four f16 pairs; two of float pairs)
                for s2 in range(2):
                    t = 32 * (gi % 2) + 16 * s2 + 2 * c
                    for k, first in ((0, t), (1, t + 8)):
                        g, pp = held[at + 2 * s2 + k]
                        assert g == grp and 2 * pp == first, (wg, gi, c, s2, k)
    print("the scale pairs' order holds for every reader")


if __name__ == "__main__":
    main()
