"""Checks the wide kernel's 16-byte epilogue stores (bench/experiments/2026-11-29_wide_epilogue_16b.patch)
against the accumulator layout they start from, without a GPU: every (query row, latent column) of a
block's 64 x 512 outputs is written exactly once, with the value the 4-byte stores wrote there.

    python tools/wide_epilogue_store_check.py

The model: warpgroup wg, warp ww, lane = 4 g + c holds o[mb][j] (j = 4 (k / 2) + k % 2) for query
row n = 8 (k / 2) + 2 c + k % 2 at column 256 wg + 64 mb + 16 ww + 2 g, and o[mb][j + 2] at the
column after (fp8_wide.cuh's epilogue).
"""


def holds(wg, ww, lane, k, mb, e):
    """(row, col) of the value a lane holds: accumulator block mb, row index k, e = 0 / 1 (j / j + 2)."""
    g, c = lane // 4, lane % 4
    n = 8 * (k // 2) + 2 * c + k % 2
    return n, 256 * wg + 64 * mb + 16 * ww + 2 * g + e


def shfl_xor(vals, lane, mask):
    return vals[lane ^ mask]


def quad_transpose4(v_all, stride):
    """v_all[lane] = list of 4 words; the patch's quad_transpose4<stride> (q = (lane / stride) % 4)."""
    v = [list(x) for x in v_all]
    for i in range(2):  # bit 1 of q
        send = [v[l][i] if ((l // stride) % 4) & 2 else v[l][2 + i] for l in range(32)]
        for l in range(32):
            got = shfl_xor(send, l, 2 * stride)
            if ((l // stride) % 4) & 2:
                v[l][i] = got
            else:
                v[l][2 + i] = got
    for i in range(2):  # then bit 0
        send = [v[l][2 * i] if ((l // stride) % 4) & 1 else v[l][2 * i + 1] for l in range(32)]
        for l in range(32):
            got = shfl_xor(send, l, stride)
            if ((l // stride) % 4) & 1:
                v[l][2 * i] = got
            else:
                v[l][2 * i + 1] = got
    return v


def check_bf16():
    written = {}
    for wg in range(2):
        for ww in range(4):
            for k in range(16):
                # a word = the pair (col, col + 1) of one row, as the value's (row, col) labels
                v_all = [[(holds(wg, ww, l, k, mb, 0), holds(wg, ww, l, k, mb, 1)) for mb in range(4)]
                         for l in range(32)]
                v_all = quad_transpose4(v_all, 4)
                for l in range(32):
                    g, c = l // 4, l % 4
                    n = 8 * (k // 2) + 2 * c + k % 2
                    q = g % 4
                    col = 256 * wg + 64 * q + 16 * ww + 8 * (g // 4)
                    for w in range(4):  # word w of the uint4: columns col + 2 w, + 1
                        for e in range(2):
                            at = (n, col + 2 * w + e)
                            assert at not in written, f"written twice: {at}"
                            assert v_all[l][w][e] == at, f"value of {v_all[l][w][e]} stored at {at}"
                            written[at] = True
    assert len(written) == 64 * 512, len(written)


def check_float():
    written = {}
    for wg in range(2):
        for ww in range(4):
            for k in range(16):
                for h in range(2):
                    e0 = [holds(wg, ww, l, k, 2 * h, 0) for l in range(32)], [holds(wg, ww, l, k, 2 * h, 1) for l in range(32)]
                    e1 = [holds(wg, ww, l, k, 2 * h + 1, 0) for l in range(32)], [holds(wg, ww, l, k, 2 * h + 1, 1) for l in range(32)]
                    send = [(e0[0][l], e0[1][l]) if (l // 4) & 1 else (e1[0][l], e1[1][l]) for l in range(32)]
                    for l in range(32):
                        g, c = l // 4, l % 4
                        odd = g & 1
                        got = send[l ^ 4]
                        val = (got[0], got[1], e1[0][l], e1[1][l]) if odd else (e0[0][l], e0[1][l], got[0], got[1])
                        n = 8 * (k // 2) + 2 * c + k % 2
                        col = 256 * wg + 64 * (2 * h + odd) + 16 * ww + 4 * (g // 2)
                        for w in range(4):
                            at = (n, col + w)
                            assert at not in written, f"written twice: {at}"
                            assert val[w] == at, f"value of {val[w]} stored at {at}"
                            written[at] = True
    assert len(written) == 64 * 512, len(written)


if __name__ == "__main__":
    check_bf16()
    check_float()
    print("the 16-byte epilogue stores write each of the 64 x 512 outputs once, with its own value (bf16 and float)")
