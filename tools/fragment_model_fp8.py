"""A model of ldmatrix (b16, plain and .trans), the mma.m16n8k16 fragments and the fp8
register-conversion scheme of bench/experiments/2026-11-24_paged_fp8_register_convert.patch (the
paged tile kernel's small tiles over fp8 caches, D = 128): the queries' head dims permuted within
each 16 so that one ldmatrix of key bytes is a lane's B fragment of S = Q K^T, and V loaded
transposed, split into even- and odd-dim column tiles of O. Checks S and O against numpy for one
warp's 16 rows x 16 keys. Then the transposed small tile (tile_kernel.cuh's TR: rows <= 8): S^T =
K Q^T with the keys as M, P^T through movmatrix.trans, O^T = V^T P^T with the head dims as M.

    python tools/fragment_model_fp8.py [D]   (D = 128 by default; 64 or 256 for the TR tiles there)
"""
import numpy as np
rng = np.random.default_rng(0)
import sys
D = int(sys.argv[1]) if len(sys.argv) > 1 else 128  # head dim (the TR layouts: 64, 128 or 256)
KEYS = 16  # one warp: 16 rows x 16 keys per step (SUB = 16)

def ldmatrix(smem_rows, trans=False):
    """smem_rows: list of 8 row byte arrays (16 bytes each) of one matrix, lane-indexed rows.
    Returns per lane (32) a 4-byte register (bytes). b16 elements: row r, col c = bytes 2c, 2c+1."""
    M = np.stack(smem_rows)  # [8 rows][16 bytes]
    regs = []
    for t in range(32):
        if not trans:
            r, c = t // 4, 2 * (t % 4)
            regs.append(np.concatenate([M[r, 2*c:2*c+2], M[r, 2*c+2:2*c+4]]))
        else:
            rr, c = 2 * (t % 4), t // 4
            regs.append(np.concatenate([M[rr, 2*c:2*c+2], M[rr+1, 2*c:2*c+2]]))
    return regs

def mma_ref_frags():
    """Index maps of m16n8k16 (row.col): A[t] -> list of (row, k) for 8 values (4 regs x 2);
    B[t] -> (k, n) for 4 values; C[t] -> (row, n) for 4 values."""
    A, B, C = {}, {}, {}
    for t in range(32):
        g, q = t // 4, t % 4
        A[t] = [(g, 2*q), (g, 2*q+1), (g+8, 2*q), (g+8, 2*q+1), (g, 2*q+8), (g, 2*q+9), (g+8, 2*q+8), (g+8, 2*q+9)]
        B[t] = [(2*q, g), (2*q+1, g), (2*q+8, g), (2*q+9, g)]
        C[t] = [(g, 2*q), (g, 2*q+1), (g+8, 2*q), (g+8, 2*q+1)]
    return A, B, C
A_MAP, B_MAP, C_MAP = mma_ref_frags()

def mma(c, a_vals, b_vals):
    """c: per-lane 4 floats; a_vals: per lane 8 values; b_vals: per lane 4 values."""
    Am = np.zeros((16, 16)); Bm = np.zeros((16, 8))
    for t in range(32):
        for (i, (r, k)) in enumerate(A_MAP[t]): Am[r, k] = a_vals[t][i]
        for (i, (k, n)) in enumerate(B_MAP[t]): Bm[k, n] = b_vals[t][i]
    Cm = Am @ Bm
    return [[c[t][i] + Cm[r, n] for i, (r, n) in enumerate(C_MAP[t])] for t in range(32)]

# --- data: fp8 "bytes" modeled as small integers (value = byte value, identity conversion)
q = rng.integers(-8, 8, (16, D)).astype(float)          # 16 query rows
k8 = rng.integers(0, 256, (KEYS, D)).astype(np.uint8)     # keys' bytes
v8 = rng.integers(0, 256, (KEYS, D)).astype(np.uint8)
val = lambda b: float(int(b) - 128)                       # the "conversion" of one byte
K = np.vectorize(val)(k8); V = np.vectorize(val)(v8)

# raw stage in smem: row `key` chunk c (16 bytes) at chunk position c ^ (key & 7)
def smem_k_row(mat, key, chunk):
    return mat[key, 16 * chunk:16 * chunk + 16]  # (the swizzle only moves where it lives)

# Q in smem, permuted per 16-d block: logical chunk 0 = phys words {0,2,4,6}, chunk 1 = {1,3,5,7}
def perm_block(x16):  # 16 values of one block, phys order -> logical order
    w = [x16[2*i:2*i+2] for i in range(8)]
    return np.concatenate([w[0], w[2], w[4], w[6], w[1], w[3], w[5], w[7]])
q_log = np.stack([np.concatenate([perm_block(q[r, 16 * b:16 * b + 16]) for b in range(D // 16)]) for r in range(16)])

# S = Q K^T with 8 k-steps (16 logical k each); A from q_log, B from K bytes
S = [[0.0] * 4 for _ in range(32)]
S2 = [[0.0] * 4 for _ in range(32)]  # second n-tile (keys 8..15)
for ks in range(D // 16):
    a_vals = [[q_log[r, 16*ks + k] for (r, k) in A_MAP[t]] for t in range(32)]
    for ntile, acc in ((0, S), (1, S2)):
        rows = [smem_k_row(k8, ntile * 8 + l, ks) for l in range(8)]
        regs = ldmatrix(rows)
        b_vals = [[val(regs[t][0]), val(regs[t][1]), val(regs[t][2]), val(regs[t][3])] for t in range(32)]
        new = mma(acc, a_vals, b_vals)
        for t in range(32): acc[t][:] = new[t]
ref = q @ K.T  # [16, 16]
for t in range(32):
    for i, (r, n) in enumerate(C_MAP[t]):
        assert abs(S[t][i] - ref[r, n]) < 1e-6, ("S", t, i)
        assert abs(S2[t][i] - ref[r, 8 + n]) < 1e-6, ("S2", t, i)
print("S = Q K^T: ok")

# O = P V with P = S values (any floats) as A fragments from the C fragments (standard), V via trans
P = rng.standard_normal((16, KEYS))
a_vals = []
for t in range(32):
    g, qq = t // 4, t % 4
    # a[0] = (s[0][0], s[0][1]) row g keys 2q,2q+1; a[1] = row g+8; a[2] = s[1][0..1] keys 8+2q; a[3] = row g+8
    a_vals.append([P[g, 2*qq], P[g, 2*qq+1], P[g+8, 2*qq], P[g+8, 2*qq+1], P[g, 8+2*qq], P[g, 8+2*qq+1], P[g+8, 8+2*qq], P[g+8, 8+2*qq+1]])
acc = {n: [[0.0] * 4 for _ in range(32)] for n in range(2 * (D // 16))}
for c in range(D // 16):  # chunk c: 16 d values
    m_lo = ldmatrix([smem_k_row(v8, l, c) for l in range(8)], trans=True)      # keys 0-7
    m_hi = ldmatrix([smem_k_row(v8, 8 + l, c) for l in range(8)], trans=True)  # keys 8-15
    for par in (0, 1):
        b_vals = []
        for t in range(32):
            lo, hi = m_lo[t], m_hi[t]
            perm_lo = [lo[0], lo[2], lo[1], lo[3]]  # __byte_perm(x, 0, 0x3120)
            perm_hi = [hi[0], hi[2], hi[1], hi[3]]
            pair_lo = perm_lo[0:2] if par == 0 else perm_lo[2:4]
            pair_hi = perm_hi[0:2] if par == 0 else perm_hi[2:4]
            b_vals.append([val(pair_lo[0]), val(pair_lo[1]), val(pair_hi[0]), val(pair_hi[1])])
        n = 2 * c + par
        acc[n] = mma(acc[n], a_vals, b_vals)
refO = P @ V
for n in acc:
    c, par = n // 2, n % 2
    for t in range(32):
        for i, (r, j) in enumerate(C_MAP[t]):
            e = j - 2 * (t % 4)
            d = 16 * c + 4 * (t % 4) + 2 * e + par
            assert abs(acc[n][t][i] - refO[r, d]) < 1e-6, ("O", n, t, i)
print("O = P V with the even/odd column tiles: ok")

# --- The transposed small tile (rows <= 8: `T8` in tile_kernel.cuh): S^T = K Q^T with the warp's
# 16 keys as M and 8 query rows as N, then O^T = V^T P^T with 16 head dims as M.
Q8 = q[:8]
q8_log = q_log[:8]
# Q^T's B fragments, from the permuted query rows by plain ldmatrix: lane t gets row t / 4 and
# logical dims 2 (t % 4) .. + 1 (b0) and + 8 (b1) of each k-step.
def q_b_vals(ks):
    return [[q8_log[n, 16 * ks + k] for (k, n) in B_MAP[t]] for t in range(32)]
ST = [[0.0] * 4 for _ in range(32)]
for ks in range(0, D // 16, 2):
    # ldmatrix_x4: matrices (keys 0-7, chunk ks), (keys 8-15, ks), (keys 0-7, ks + 1), (keys 8-15, ks + 1)
    mats = [ldmatrix([smem_k_row(k8, 8 * (m & 1) + l, ks + (m >> 1)) for l in range(8)]) for m in range(4)]
    for i in range(2):
        a_vals = []
        for t in range(32):
            r_lo, r_hi = mats[2 * i][t], mats[2 * i + 1][t]  # keys g and g + 8, 4 bytes each
            # fp8x4_to_half2x2_bits(word, lo, hi): lo = bytes 0, 1 (a0 / a1), hi = bytes 2, 3 (a2 / a3)
            a_vals.append([val(r_lo[0]), val(r_lo[1]), val(r_hi[0]), val(r_hi[1]),
                           val(r_lo[2]), val(r_lo[3]), val(r_hi[2]), val(r_hi[3])])
        ST = mma(ST, a_vals, q_b_vals(ks + i))
refT = K @ Q8.T  # [16 keys, 8 rows]
for t in range(32):
    for i, (key, n) in enumerate(C_MAP[t]):
        assert abs(ST[t][i] - refT[key, n]) < 1e-6, ("S^T", t, i)
print("S^T = K Q^T (keys as M, 8 rows as N): ok")

# P^T as O^T's B fragments: lane t holds P[rows 2q, 2q+1][key g] and [key g + 8] (C layout);
# packed pairs x0 = (c0, c1), x1 = (c2, c3) are 8x8 b16 matrices [key][row]; movmatrix.trans gives
# lane t the elements [row g][keys 2q, 2q + 1] of each: b0 (keys 0-7), b1 (keys 8-15).
def movmatrix_trans(pairs):  # pairs[t] = (elem col 2q, elem col 2q+1) of row g
    Mx = np.zeros((8, 8))
    for t in range(32):
        Mx[t // 4, 2 * (t % 4)], Mx[t // 4, 2 * (t % 4) + 1] = pairs[t]
    Mt = Mx.T
    return [(Mt[t // 4, 2 * (t % 4)], Mt[t // 4, 2 * (t % 4) + 1]) for t in range(32)]
P8 = rng.standard_normal((8, KEYS))
ST_p = [[P8[n, key] for (key, n) in C_MAP[t]] for t in range(32)]
b0 = movmatrix_trans([(ST_p[t][0], ST_p[t][1]) for t in range(32)])
b1 = movmatrix_trans([(ST_p[t][2], ST_p[t][3]) for t in range(32)])
pb_vals = [[b0[t][0], b0[t][1], b1[t][0], b1[t][1]] for t in range(32)]
for t in range(32):  # exactly P^T's B fragment
    assert pb_vals[t] == [P8[n, k] for (k, n) in B_MAP[t]], ("P^T", t)
OT = {n: [[0.0] * 4 for _ in range(32)] for n in range(D // 16)}
for c in range(0, D // 16, 2):
    # ldmatrix_x4_trans: (keys 0-7, chunk c), (keys 8-15, c), (keys 0-7, c + 1), (keys 8-15, c + 1)
    mats = [ldmatrix([smem_k_row(v8, 8 * (m & 1) + l, c + (m >> 1)) for l in range(8)], trans=True) for m in range(4)]
    for par in (0, 1):
        a_vals = []
        for t in range(32):
            halves = []
            for m in (0, 2, 1, 3):  # a0: dim row g (chunk c), keys 2q..; a1: row g + 8 (chunk c + 1); a2, a3: keys + 8
                x = mats[m][t]
                perm = [x[0], x[2], x[1], x[3]]  # __byte_perm(x, 0, 0x3120)
                halves += perm[2 * par:2 * par + 2]
            a_vals.append([val(b) for b in halves])
        OT[c + par] = mma(OT[c + par], a_vals, pb_vals)
refOT = (P8 @ V).T  # [D, 8 rows]
for n in OT:
    for t in range(32):
        for i, (mrow, r) in enumerate(C_MAP[t]):
            # acc[n][i]: row 2q + (i & 1); dim 16 (n & ~1) + 16 (i >> 1) + 2 g + (n & 1)
            g = t // 4
            d = 16 * (n & ~1) + 16 * (i >> 1) + 2 * g + (n & 1)
            assert r == 2 * (t % 4) + (i & 1) and mrow == g + 8 * (i >> 1)
            assert abs(OT[n][t][i] - refOT[d, r]) < 1e-6, ("O^T", n, t, i)
print("O^T = V^T P^T (16 dims as M: chunks c and c + 1's even or odd dims): ok")

# --- The raw stages' swizzle (tile_kernel.cuh's raw_at): a bijection of each key row's chunks, and
# each ldmatrix phase (8 consecutive keys from a multiple of 8, one logical chunk) on 8 different
# 16-byte bank groups of the 128 bytes a phase's banks span.
for Dm in (64, 128, 256):
    def raw_at(key, c):
        return key * Dm + ((c ^ ((key >> 1) & 3) if Dm == 64 else c ^ (key & 7)) << 4)
    chunks = Dm // 16
    for key in range(64):
        assert sorted((raw_at(key, c) - key * Dm) >> 4 for c in range(chunks)) == list(range(chunks)), ("row", Dm, key)
    for k0 in range(0, 64, 8):
        for c in range(chunks):
            groups = {(raw_at(k0 + i, c) % 128) >> 4 for i in range(8)}
            assert len(groups) == 8, ("bank groups", Dm, k0, c, groups)
print("raw stage swizzle (D = 64, 128, 256): rows permuted, ldmatrix phases conflict-free: ok")
