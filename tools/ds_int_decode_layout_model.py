"""A model of the fragment layouts of bench/experiments/2026-11-28_ds_int_decode.patch (NOTES item 67):
the wide MLA kernel's kDs path with the integer e4m3 decode (fp8_wide.cuh). Bytes are tracked as
symbols (token, dim) through ldmatrix, byte_perm and the decodes, and it checks, for every lane:

- S^T: the fast path (ds_e4m3x4_to_f16x2_down of each ldmatrix register) and the cvt fallback
  (byte_perm 0x3120, then the mov-split cvt) put the same (token, dim) pairs in each A register;
  the A layout's k-positions then hold the dims that Q^T's writer stores at those positions
  (evens, then odds of each 16-dim group), so S^T = K Q^T;
- O^T: the fast path (byte_perm 0x6240 / 0x7351, then the decode) and wide_v_fragments (byte_perm
  0x6420 / 0x7531, then the mov-split cvt) put the same (token, column) pairs in each A register.

    python3 tools/ds_int_decode_layout_model.py
"""


def byte_perm(x, y, sel):
    src = list(x) + list(y)
    return [src[(sel >> (4 * i)) & 0xF] for i in range(4)]


def mov_split_cvt(w):  # wide_fp8x4_to_f16x2: lo = bytes (0, 1), hi = bytes (2, 3)
    return (w[0], w[1]), (w[2], w[3])


def int_decode(w):  # ds_e4m3x4_to_f16x2_down: ev = bytes (0, 2), od = bytes (1, 3)
    return (w[0], w[2]), (w[1], w[3])


def check_st():
    bad = 0
    for lane in range(32):
        g, c = lane // 4, lane % 4
        # ldmatrix x4 of the raw tile's 32-dim segment: register q = matrix q, this lane's row g,
        # bytes 4c .. 4c + 3 of the matrix's 16; matrices: (tokens 0-7 | 8-15) x (dims 0-15 | 16-31).
        rr = [[(g + 8 * (q % 2), 16 * (q // 2) + 4 * c + i) for i in range(4)] for q in range(4)]
        fast, slow = [None] * 8, [None] * 8
        for i in range(4):
            lo_hi = int_decode(rr[i])
            fast[4 * (i // 2) + i % 2], fast[4 * (i // 2) + 2 + i % 2] = lo_hi
            lo_hi = mov_split_cvt(byte_perm(rr[i], [None] * 4, 0x3120))
            slow[4 * (i // 2) + i % 2], slow[4 * (i // 2) + 2 + i % 2] = lo_hi
        bad += fast != slow
        # The m64nNk16 A layout of k-step h: register 4h + r holds (row g + 8 (r % 2), k 2c + 8 (r // 2),
        # + 1). Q^T's writer (chunk hf = dims 8 hf .. + 7 of a group: words 2 hf, 2 hf + 1 = evens,
        # words 4 + 2 hf, 5 + 2 hf = odds) puts at k-position p the dim q_dim(p).
        def q_dim(p):
            word, e = p // 2, p % 2
            if word < 4:
                hf, j = word // 2, 2 * (word % 2) + e  # even dims x0, x2, x4, x6 of chunk hf
                return 8 * hf + 2 * j
            hf, j = (word - 4) // 2, 2 * ((word - 4) % 2) + e
            return 8 * hf + 2 * j + 1
        for h in range(2):
            for r in range(4):
                for e in range(2):
                    tok, dim = fast[4 * h + r][e]
                    want = (g + 8 * (r % 2), 16 * h + q_dim(2 * c + 8 * (r // 2) + e))
                    bad += (tok, dim) != want
    return bad


def check_ot():
    bad = 0
    for lane in range(32):
        g, c = lane // 4, lane % 4
        # ldmatrix x4 .trans of byte pairs: register q holds tokens 8q + 2c, + 1 x columns 2g, 2g + 1
        # as (t0 col 2g, t0 col 2g + 1, t1 col 2g, t1 col 2g + 1).
        raw = [[(8 * q + 2 * c + i // 2, 2 * g + i % 2) for i in range(4)] for q in range(4)]
        fast, slow = [None] * 8, [None] * 8
        for s in range(2):
            ev, od = int_decode(byte_perm(raw[2 * s], raw[2 * s + 1], 0x6240))
            fast[4 * s + 0], fast[4 * s + 2] = ev, od
            ev, od = int_decode(byte_perm(raw[2 * s], raw[2 * s + 1], 0x7351))
            fast[4 * s + 1], fast[4 * s + 3] = ev, od
            lo, hi = mov_split_cvt(byte_perm(raw[2 * s], raw[2 * s + 1], 0x6420))
            slow[4 * s + 0], slow[4 * s + 2] = lo, hi
            lo, hi = mov_split_cvt(byte_perm(raw[2 * s], raw[2 * s + 1], 0x7531))
            slow[4 * s + 1], slow[4 * s + 3] = lo, hi
        bad += fast != slow
    return bad


if __name__ == "__main__":
    st, ot = check_st(), check_ot()
    print(f"S^T: {st} mismatches, O^T: {ot} mismatches")
    raise SystemExit(1 if st or ot else 0)
