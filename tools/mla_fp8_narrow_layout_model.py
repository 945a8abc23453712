"""The narrow fp8 MLA kernel's V^T and P'^T layouts modelled byte by byte (no GPU): a raw tile
as TMA's 128-byte swizzle lays it out, the softmax's P'^T byte stores and the O^T = V^T P'^T
products' reads of it through its descriptor, and three forms of V^T's operand - checked against
sum_t V[t] P[t] for whole and cut tiles (tail tokens masked):
  registers (sm90/fp8_narrow.cuh since session 54): each warp's ldmatrix .trans / byte_perm on its
    per-lane offsets into the wgmma register A fragments (rows lane / 4 and + 8, k positions
    4 (lane % 4) + 0..3 and + 16), the product's rows read back as the kernel's columns (row g of
    a warp's 16: column 2g, row g + 8: 2g + 1);
  own buffer (the kernel until session 54): the transposer's ldmatrix .trans / byte_perm / stmatrix
    into a 64-byte-swizzled V^T, read through the product's descriptor;
  in place (bench/experiments/2026-11-25_mla_fp8_narrow_inplace_vt_4buf.patch): the same stored
    over the raw tile (no swizzle, LBO 2 KB, SBO 128 B).
P'^T's word stores (2026-11-29_narrow_pt_words.patch: a pair swapped with lane ^ 4, one 4-byte store
per query a lane) are checked against its byte stores. Exit status 1 on a mismatch. (Written for
NOTES item 45 f's review; registers and the word stores for item 79.)

    python3 tools/mla_fp8_narrow_layout_model.py
"""

import sys

import numpy as np

BLOCK = 8192  # a raw tile's 128-column block: 64 tokens x 128 bytes


def sw128(row, chunk):
    return row * 128 + ((chunk ^ (row % 8)) * 16)


def sw64(row, chunk):
    return row * 64 + ((chunk ^ ((row // 2) % 4)) * 16)


def raw_tile(v):
    """v[token, column byte] (640 columns: 576 real) in TMA's 128-byte-swizzled boxes."""
    mem = np.zeros(5 * BLOCK, np.int64)
    for b in range(5):
        for t in range(64):
            for j in range(128):
                mem[b * BLOCK + sw128(t, j // 16) + j % 16] = v[t, 128 * b + j]
    return mem


def ldmatrix_x4_trans(mem, addrs):
    """Lane l gets, of matrix i (rows at addrs[8 i + row]), the b16 column l / 4 of rows
    2 (l % 4) and + 1: four bytes per register."""
    return [[[mem[addrs[8 * i + k] + 2 * (l // 4) + e] for k in (2 * (l % 4), 2 * (l % 4) + 1) for e in (0, 1)]
             for i in range(4)] for l in range(32)]


def stmatrix_x4(mem, addrs, regs):
    """Lane l's register i goes to matrix i's row l / 4 (at addrs[8 i + l / 4]), bytes 4 (l % 4) .. + 3."""
    for l in range(32):
        for i in range(4):
            for n in range(4):
                mem[addrs[8 * i + l // 4] + 4 * (l % 4) + n] = regs[l][i][n]


def byte_perm(a, b, sel):
    x = a + b
    return [x[(sel >> (4 * n)) & 0xF] for n in range(4)]


def transpose(mem, inplace, valid):
    vt = mem if inplace else np.zeros(512 * 64, np.int64)
    for ww in range(4):
        keep = [[t < valid for t in (ww * 16 + 2 * (l % 4) + d for d in (0, 1, 8, 9))] for l in range(32)]
        ld = [[(ww * 16 + 8 * ((l // 8) % 2) + l % 8) * 128 + (((2 * k + (l // 8) // 2) ^ (l % 8)) * 16)
               for l in range(32)] for k in range(4)]
        for x0 in range(0, 16, 4):  # (all four loads of a block before its stores: in place, they must)
            rr = [ldmatrix_x4_trans(mem, [(x0 // 4) * BLOCK + ld[i][l] for l in range(32)]) for i in range(4)]
            for i in range(4):
                regs = []
                for l in range(32):
                    r = rr[i][l]
                    words = [byte_perm(r[0], r[1], 0x6420), byte_perm(r[0], r[1], 0x7531),
                             byte_perm(r[2], r[3], 0x6420), byte_perm(r[2], r[3], 0x7531)]
                    regs.append([[w[n] if keep[l][n] else 0 for n in range(4)] for w in words])
                rowpart = [16 * (l // 16) + 2 * (l % 8) + (l // 8) % 2 for l in range(32)]
                if inplace:
                    addrs = [(x0 // 4) * BLOCK + 512 * i + ww * 2048 + rp * 16 for rp in rowpart]
                else:
                    addrs = [rp * 64 + ((ww ^ ((l % 8) % 4)) * 16) + 2048 * (x0 + i) for l, rp in enumerate(rowpart)]
                stmatrix_x4(vt, addrs, regs)
    return vt


def register_product(mem, b_op, valid):
    """O^T from V^T's register fragments as the kernel loads them (load_v) and the m64n32k32 products
    with A from registers: out[column][n]."""
    out = np.zeros((512, 32), np.int64)
    for ww in range(4):
        keep = [[t < valid for t in (16 * g + 2 * (l % 4) + d for d in (0, 1, 8, 9))] for g in range(4) for l in range(32)]
        for mb in range(8):
            col = 64 * mb + 16 * ww
            for kk in range(2):
                # lane l addresses row l % 8 of matrix l / 8: token 32 kk + l, the 16 columns at col
                rr = ldmatrix_x4_trans(mem, [(col // 128) * BLOCK + sw128(32 * kk + l, (col % 128) // 16)
                                             for l in range(32)])
                for l in range(32):
                    r = rr[l]
                    words = [byte_perm(r[0], r[1], 0x6420), byte_perm(r[0], r[1], 0x7531),
                             byte_perm(r[2], r[3], 0x6420), byte_perm(r[2], r[3], 0x7531)]
                    for i, w in enumerate(words):
                        g = 2 * kk + i // 2  # the 16-token group of the word's tokens
                        row = l // 4 + 8 * (i % 2)  # A's row in the warp's 16 (register i: row + 8 if odd)
                        column = col + 2 * (l // 4) + i % 2  # the kernel's column of that row
                        for n in range(4):
                            a = w[n] if keep[32 * g + l][n] else 0
                            k = 4 * (l % 4) + 16 * (i // 2) + n  # the fragment's k position
                            assert row % 8 == l // 4
                            out[column] += a * b_op[32 * kk + k]
    return out


def pt_tile(p):
    """P'^T as the softmax writes it: thread (ww, lane) holds tokens ww 16 + lane / 4 (+ 8)."""
    pt = np.zeros(32 * 64, np.int64)
    for ww in range(4):
        for lane in range(32):
            slot_lo = ww * 16 + 4 * ((lane // 4) // 2) + (lane // 4) % 2
            for j in range(4):
                n = 8 * j + 2 * (lane % 4)
                for h in range(2):
                    slot, t = (slot_lo + 2 * h, ww * 16 + lane // 4 + 8 * h)
                    for row in (n, n + 1):
                        pt[sw64(row, slot // 16) + slot % 16] = p[t, row]
    return pt


def pt_tile_packed(p):
    """P'^T as 2026-11-29_narrow_pt_words.patch writes it: a lane's hi pair and lo pair (its slots s, s + 2),
    one pair swapped with lane ^ 4 (slots s + 1, s + 3), one byte_perm'd word stored a lane."""
    pt = np.zeros(32 * 64, np.int64)
    for ww in range(4):
        pairs = {}  # (lane, j) -> (hi pair, lo pair): [slot s byte, slot s + 2 byte] of rows n, n + 1
        for lane in range(32):
            for j in range(4):
                n = 8 * j + 2 * (lane % 4)
                t0, t1 = ww * 16 + lane // 4, ww * 16 + lane // 4 + 8
                pairs[lane, j] = ([p[t0, n], p[t1, n], 0, 0], [p[t0, n + 1], p[t1, n + 1], 0, 0])  # (16-bit values in a word)
        for lane in range(32):
            even = (lane // 4) % 2 == 0
            slot4 = ww * 16 + 4 * ((lane // 4) // 2)
            for j in range(4):
                hp, lp = pairs[lane, j]
                php, plp = pairs[lane ^ 4, j]
                recv = plp if not even else php  # what the partner sent: its lo pair if it is even
                word = byte_perm(hp if even else lp, recv, 0x5140 if even else 0x1504)
                row = 8 * j + 2 * (lane % 4) + (0 if even else 1)
                for b in range(4):
                    pt[sw64(row, slot4 // 16) + slot4 % 16 + b] = word[b]
    return pt


def main():
    rng = np.random.default_rng(0)
    v = rng.integers(1, 250, size=(64, 640)).astype(np.int64)
    p = rng.integers(1, 250, size=(64, 32)).astype(np.int64)
    ok = True
    for valid in (64, 63, 37, 32, 16, 1):
        want = sum(np.outer(v[t, :512], p[t]) for t in range(valid))
        pt = pt_tile(p)
        packed = np.array_equal(pt_tile_packed(p), pt)
        print(f"P'^T's packed word stores {'match' if packed else 'DIFFER from'} its byte stores")
        ok &= packed
        b_op = np.array([[pt[sw64(n, s // 16) + s % 16] for n in range(32)] for s in range(64)])  # [slot][n]
        out = register_product(raw_tile(v), b_op, valid)
        same = np.array_equal(out, want)
        print(f"valid tokens {valid:2d}, V^T in registers: O^T {'matches' if same else 'DIFFERS'}")
        ok &= same
        for inplace in (False, True):
            mem = raw_tile(v)
            vt = transpose(mem, inplace, valid)
            out = np.zeros((512, 32), np.int64)
            for mb in range(8):
                for kk in range(2):
                    for m in range(64):
                        for k in range(32):
                            if inplace:  # no swizzle: SBO 128 (8 rows), LBO 2048 (16 slots)
                                start = (mb // 2) * BLOCK + (mb % 2) * 1024 + 4096 * kk
                                a = mem[start + (m // 8) * 128 + (k // 16) * 2048 + (m % 8) * 16 + k % 16]
                            else:
                                a = vt[mb * 64 * 64 + sw64(m, (32 * kk + k) // 16) + k % 16]
                            out[64 * mb + m] += a * b_op[32 * kk + k]
            same = np.array_equal(out, want)
            rope = not inplace or np.array_equal(mem[4 * BLOCK:], raw_tile(v)[4 * BLOCK:])
            print(f"valid tokens {valid:2d}, V^T {'in place' if inplace else 'own buffer'}: "
                  f"O^T {'matches' if same else 'DIFFERS'}{'' if rope else ', rope block overwritten'}")
            ok &= same and rope
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
