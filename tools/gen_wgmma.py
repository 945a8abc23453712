"""Writes src/common/sm90/wgmma_ops.inc: the Hopper wgmma shapes the MLA kernel uses, spelled out.

wgmma's PTX form lists every accumulator register as its own operand (16 for n32, 128 for n256),
which is unreadable by hand; this script is the readable definition. Run it from the repo root.
"""

SS = """// m64n{N}k16, A and B from shared memory (descriptors), A {A_MAJOR}, B {B_MAJOR}. D (+)= A * B.
#define JP_WGMMA_M64N{N}K16_SS{MACRO_SUFFIX}(TY)                                            \\
  __device__ __forceinline__ void wgmma_m64n{N}k16_ss{FN_SUFFIX}_##TY(float (&d)[{R}], uint64_t desc_a, \\
                                                          uint64_t desc_b, int accumulate) { \\
    asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, %{P}, 0;\\n"                          \\
                 "wgmma.mma_async.sync.aligned.m64n{N}k16.f32." #TY "." #TY " "           \\
                 "{{{dregs}}}, %{A}, %{B}, p, 1, 1, {TA}, {TB};\\n}}\\n"                        \\
                 : {douts}                                                              \\
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate));                          \\
  }}
"""


def ss(n, trans_b, trans_a=False):
    """The SS template for m64n{n}k16; B (A) transposed (MN-major) when trans_b (trans_a)."""
    r = n // 2  # accumulator registers per thread
    fields = {"{N}": n, "{R}": r, "{A}": r, "{B}": r + 1, "{P}": r + 2, "{TB}": int(trans_b), "{TA}": int(trans_a),
              "{A_MAJOR}": "MN-major (transposed)" if trans_a else "K-major",
              "{B_MAJOR}": "MN-major (transposed)" if trans_b else "K-major",
              "{MACRO_SUFFIX}": ("_TRANSA" if trans_a else "") + ("_TRANSB" if trans_b else ""),
              "{FN_SUFFIX}": ("_ta" if trans_a else "") + ("_tb" if trans_b else "")}
    text = SS
    for key, value in fields.items():
        text = text.replace(key, str(value))
    return fill(text, r)


RS = """// m64n256k16, A from registers (4 x 32 bits per thread, the mma.m16n8k16 A layout per warp),
// B from shared memory MN-major (transposed). D (+)= A * B.
#define JP_WGMMA_M64N256K16_RS_TRANSB(TY)                                                   \\
  __device__ __forceinline__ void wgmma_m64n256k16_rs_tb_##TY(float (&d)[128], const uint32_t (&a)[4], \\
                                                             uint64_t desc_b, int accumulate) { \\
    asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, %133, 0;\\n"                          \\
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32." #TY "." #TY " "           \\
                 "{{{dregs}}}, {{%128, %129, %130, %131}}, %132, p, 1, 1, 1;\\n}}\\n"         \\
                 : {douts}                                                               \\
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \\
  }}
"""


# fp8 (e4m3 / e5m2) shapes: k = 32 bytes, both operands K-major (wgmma's fp8 forms have no
# transpose immediates), for the fp8-operand MLA design (NOTES item 43 e; tools/wgmma_fp8_probe.cu).
RS8 = """// m64n{N}k32, fp8 A from registers (4 x 32 bits per thread: the mma.m16n8k32 A layout per warp,
// bytes of rows lane / 4 and + 8, columns 4 (lane % 4) + 0..3 and + 16), B from shared memory
// K-major. D (+)= A * B in float32.
#define JP_WGMMA_M64N{N}K32_RS_F8(TY)                                                      \\
  __device__ __forceinline__ void wgmma_m64n{N}k32_rs_##TY(float (&d)[{R}], const uint32_t (&a)[4], \\
                                                          uint64_t desc_b, int accumulate) { \\
    asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, %{P}, 0;\\n"                          \\
                 "wgmma.mma_async.sync.aligned.m64n{N}k32.f32." #TY "." #TY " "           \\
                 "{{{dregs}}}, {{%{A0}, %{A1}, %{A2}, %{A3}}}, %{B}, p, 1, 1;\\n}}\\n"         \\
                 : {douts}                                                              \\
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \\
  }}
"""


# 16-bit A from registers, B K-major (the wide fp8 MLA kernel's S^T = K Q^T and O^T = V^T P^T: the
# cache's fp8 values converted to f16 in registers; NOTES item 47, tools/wgmma_rega_probe.cu).
RSK = """// m64n{N}k16, A from registers (4 x 32 bits per thread, the mma.m16n8k16 A layout per warp),
// B from shared memory K-major. D (+)= A * B.
#define JP_WGMMA_M64N{N}K16_RS(TY)                                                         \\
  __device__ __forceinline__ void wgmma_m64n{N}k16_rs_##TY(float (&d)[{R}], const uint32_t* a, \\
                                                          uint64_t desc_b, int accumulate) { \\
    asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, %{P}, 0;\\n"                          \\
                 "wgmma.mma_async.sync.aligned.m64n{N}k16.f32." #TY "." #TY " "           \\
                 "{{{dregs}}}, {{%{A0}, %{A1}, %{A2}, %{A3}}}, %{B}, p, 1, 1, 0;\\n}}\\n"      \\
                 : {douts}                                                              \\
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \\
  }}
"""


# fp8 with both operands in shared memory, A and B of their own fp8 formats (the narrow fp8 MLA
# kernel's m64n32k32: A the cache's e4m3 or e5m2, B the split queries or probabilities, e4m3).
SS8AB = """// m64n{N}k32, fp8 A (TA) and B (TB: e4m3 / e5m2) from shared memory (descriptors), both
// K-major. D (+)= A * B in float32 (Hopper keeps fewer bits than float32 in each product's sums:
// callers promote partial products to float32 registers).
#define JP_WGMMA_M64N{N}K32_SS_F8AB(TA, TB)                                                \\
  __device__ __forceinline__ void wgmma_m64n{N}k32_ss_##TA##_##TB(float (&d)[{R}], uint64_t desc_a, \\
                                                                 uint64_t desc_b, int accumulate) { \\
    asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, %{P}, 0;\\n"                          \\
                 "wgmma.mma_async.sync.aligned.m64n{N}k32.f32." #TA "." #TB " "           \\
                 "{{{dregs}}}, %{A}, %{B}, p, 1, 1;\\n}}\\n"                               \\
                 : {douts}                                                              \\
                 : "l"(desc_a), "l"(desc_b), "r"(accumulate));                          \\
  }}
"""


# fp8 A from registers and B from shared memory, each of its own fp8 format (the wide fp8 MLA
# kernel's fp8-math O^T = V^T P^T: A the cache's e4m3 or e5m2 values as they are, B the e4m3
# probabilities).
RS8AB = """// m64n{N}k32, fp8 A (TA) from registers (4 x 32 bits per thread: the mma.m16n8k32 A layout per
// warp, bytes of rows lane / 4 and + 8, columns 4 (lane % 4) + 0..3 and + 16), fp8 B (TB) from
// shared memory K-major. D (+)= A * B in float32 (Hopper keeps fewer bits than float32 in the sums).
#define JP_WGMMA_M64N{N}K32_RS_F8AB(TA, TB)                                                \\
  __device__ __forceinline__ void wgmma_m64n{N}k32_rs_##TA##_##TB(float (&d)[{R}], const uint32_t* a, \\
                                                                 uint64_t desc_b, int accumulate) { \\
    asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, %{P}, 0;\\n"                          \\
                 "wgmma.mma_async.sync.aligned.m64n{N}k32.f32." #TA "." #TB " "           \\
                 "{{{dregs}}}, {{%{A0}, %{A1}, %{A2}, %{A3}}}, %{B}, p, 1, 1;\\n}}\\n"         \\
                 : {douts}                                                              \\
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate)); \\
  }}
"""


def f8(template, n):
    """An fp8 template for m64n{n}k32 (or RSK's m64n{n}k16: the same operand numbering)."""
    r = n // 2
    fields = {"{N}": n, "{R}": r, "{A}": r, "{B}": r + 1, "{P}": r + 2}
    if "{A0}" in template:
        fields = {"{N}": n, "{R}": r, "{A0}": r, "{A1}": r + 1, "{A2}": r + 2, "{A3}": r + 3, "{B}": r + 4,
                  "{P}": r + 5}
    text = template
    for key, value in fields.items():
        text = text.replace(key, str(value))
    return fill(text, r)


def fill(template, n):
    dregs = ", ".join(f"%{i}" for i in range(n))
    douts = ", ".join(f'"+f"(d[{i}])' for i in range(n))
    return template.replace("{dregs}", dregs).replace("{douts}", douts).replace("{{", "{").replace("}}", "}")


with open("src/common/sm90/wgmma_ops.inc", "w") as f:
    f.write("// Generated by tools/gen_wgmma.py; edit that script, not this file.\n")
    f.write(ss(64, trans_b=False))  # S = Q K^T of the MLA kernel (64-key tiles)
    f.write("\n\n")
    f.write(fill(RS, 128))  # O += P V, P from registers
    f.write("\n\n")
    f.write(ss(256, trans_b=True))  # O += P V, P from shared memory
    f.write("\n\n")
    f.write(f8(SS8AB, 64))  # fp8 operands: S = Q K^T
    f.write("\n\n")
    f.write(f8(RS8, 256))  # fp8 operands: O += P V^T', P from registers
    f.write("\n\n")
    f.write(f8(SS8AB, 256))  # fp8 operands: O += P V^T', P from shared memory (the peer's tile)
    f.write("\n\n")
    f.write(f8(SS8AB, 32))  # the narrow fp8 kernel's S^T and O^T products
    f.write("\n\n")
    f.write(f8(RSK, 64))  # the wide fp8 kernel's S^T and O^T products, A converted in registers
    f.write("\n\n")
    f.write(f8(RS8AB, 64))  # the wide fp8 kernel's fp8-math O^T, A the cache's bytes
    f.write("\n\n")
    f.write(f8(RS8AB, 32))  # the narrow fp8 kernel's O^T, A V^T's fragments (ldmatrix .trans, byte_perm)
    f.write("\n\n")
    f.write(ss(64, trans_b=False, trans_a=True))  # O^T = V^T P^T with V^T from a bf16 tile (NOTES item 65 f)
