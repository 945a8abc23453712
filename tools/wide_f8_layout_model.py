"""A model of the wide fp8 MLA kernel's fp8-math O^T = V^T P^T fragments (sm90/fp8_wide.cuh, kF8):
the P^T writer (stmatrix .trans of 16-bit units (token g, token g + 8) from the S^T accumulators),
the A fragments of V^T from ldmatrix x4 .trans of the raw tile and two byte_perms
(wide_v_fragments_f8), and the m64nNk32 8-bit A layout. Checks one warp's 16 columns x 64 query
rows over one k32 step (32 tokens) against numpy, with the M rows relabelled as the kernel's
(row g = column 2g, row g + 8 = column 2g + 1).

    python tools/wide_f8_layout_model.py
"""
import numpy as np

rng = np.random.default_rng(0)
V = rng.integers(-8, 8, size=(32, 16))   # [token][column] of one warp's 16 columns, tokens of one k-step
P = rng.integers(0, 8, size=(32, 64))    # [token][query row]


def ldmatrix_trans(rows):
    """rows[i] = 16 bytes of matrix row i (b16 element j = bytes 2j, 2j + 1). Per lane t = 4g + c:
    elements (row 2c, col g) and (row 2c + 1, col g) as 4 bytes."""
    return [[rows[2 * (t % 4)][2 * (t // 4)], rows[2 * (t % 4)][2 * (t // 4) + 1],
             rows[2 * (t % 4) + 1][2 * (t // 4)], rows[2 * (t % 4) + 1][2 * (t // 4) + 1]] for t in range(32)]


def byte_perm(x, y, sel):
    src = list(x) + list(y)
    return [src[(sel >> (4 * i)) & 0xF] for i in range(4)]


# A fragments: ldmatrix x4 .trans, lane L addresses token L (matrix L // 8, row L % 8).
raw = [ldmatrix_trans([V[8 * q + i] for i in range(8)]) for q in range(4)]  # raw[q][lane] = 4 bytes
A = np.zeros((16, 32), dtype=np.int64)  # [M row][k]
for t in range(32):
    g, c = t // 4, t % 4
    regs = [byte_perm(raw[0][t], raw[1][t], 0x6240), byte_perm(raw[0][t], raw[1][t], 0x7351),
            byte_perm(raw[2][t], raw[3][t], 0x6240), byte_perm(raw[2][t], raw[3][t], 0x7351)]
    # m16n8k32 8-bit A: reg 0 row g, k 4c + i; reg 1 row g + 8; regs 2, 3: k + 16
    for r, (row, k0) in enumerate([(g, 4 * c), (g + 8, 4 * c), (g, 16 + 4 * c), (g + 8, 16 + 4 * c)]):
        for i in range(4):
            A[row, k0 + i] = regs[r][i]

# P^T: two warps (token groups w = 0, 1 of the step) each store, per n-block jb, one 8x8 b16 matrix
# transposed: thread (g, c) holds unit (token 16 w + g, token 16 w + g + 8) of rows 8 jb + 2c + e.
PT = np.zeros((64, 32), dtype=np.int64)  # [query row][byte of the k-step]
for w in range(2):
    for jb in range(8):
        frag = {}  # (fragment row g, fragment col 2c + e) -> (lo byte, hi byte)
        for t in range(32):
            g, c = t // 4, t % 4
            for e in range(2):
                n = 8 * jb + 2 * c + e
                frag[(g, 2 * c + e)] = (P[16 * w + g, n], P[16 * w + g + 8, n])
        for r in range(8):       # .trans: stored row r = fragment column r; its element j = fragment row j
            for j in range(8):
                lo, hi = frag[(j, r)]
                PT[8 * jb + r, 16 * w + 2 * j] = lo
                PT[8 * jb + r, 16 * w + 2 * j + 1] = hi

D = A @ PT.T  # [M row][query row]: B[k][n] = P^T row n, byte k (K-major)
col = [2 * g for g in range(8)] + [2 * g + 1 for g in range(8)]
ref = V[:, col].T @ P
assert np.array_equal(D, ref), "layout mismatch"
print("wide fp8-math O^T fragments: OK (16 columns x 64 rows x 32 tokens)")
