// Session 61: the host check behind 2026-12-09_narrow_q_compact.patch. Emulates, thread by thread,
// the narrow fp8 kernel's query section (src/mla_decode/sm90/fp8_narrow.cuh) as HEAD has it (head:
// each thread's 4.5 chunks in registers, fmaxf over floats, e4m3_query_exponent, an inf check on
// every value) and as the patch has it (patch: staged through the exchange area, max.bf16x2 over
// sign-cleared pairs, the integer k, the inf check only in warps with an infinite row, pairs
// converted and the hi bytes read back for lo), and compares the bytes each leaves in Q' (all five
// column blocks, 32 rows x 128 bytes each, pre-filled with a pattern: unwritten bytes count) and
// the 16 floats of sQScale, bit for bit, over many 16-row sequences: random and special rows (+-inf,
// NaN of either sign and payload, +-0, bf16 subnormals, tiny, huge, e4m3 rounding ties, the
// exponent rule's edges, random bit patterns), 1 .. 16 live rows (the rest zero). It also checks
// that the staging stays inside the exchange area and that each thread reads back only what it
// staged itself (cp.async.wait_group makes only a thread's own copies visible to it).
// Both use the same per-value operations (a float product by 2^k, cvt.rn.satfinite.e4m3x2.f32,
// e4m3 -> half -> float, a float difference), modelled here; what is checked is what differs: the
// data movement, the maximum, k, and where inf is replaced. cvt's NaN output is run under two
// models (0x7F always; the NaN's sign kept), which the results must not depend on.
// Build: g++ -O2 -std=c++17 -o /tmp/narrowq_check THIS && /tmp/narrowq_check [sequences] [fault]
// (no -ffast-math: the float operations must be IEEE's, subnormals included). fault 1 (the inf
// check dropped) and 2 (k's cap and 1.75 edge wrong) must report mismatches.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr int kRows = 16, kLatent = 512, kRope = 64, kDims = kLatent + kRope;
constexpr int kQBlock = 32 * 128, kQBytes = 5 * kQBlock;
constexpr int kXchBytes = kRows * 256 * 4, kXchArea = 2 * kXchBytes;

int g_nan_model = 0;
int g_mutate = 0;  // (a deliberate fault in the patch's emulation, to see the check catch it: argv[2])  // 0: cvt gives 0x7F for any NaN; 1: the NaN's sign kept

float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
float bf(uint16_t b) { return u2f(uint32_t(b) << 16); }

// cvt.rn.satfinite.e4m3.f32 of one value (round to nearest even; past 448, infinity included, 448).
uint8_t to_e4m3(float x) {
  const uint32_t u = f2u(x);
  const uint8_t sign = uint8_t((u >> 24) & 0x80u);
  if (std::isnan(x)) return g_nan_model == 0 ? 0x7F : uint8_t(sign | 0x7F);
  const double a = std::fabs(double(x));
  if (a >= 448.0) return uint8_t(sign | 0x7E);
  if (a < std::ldexp(1.0, -6)) {  // subnormal steps of 2^-9 (8 steps: the smallest normal)
    const double q = a * 512.0;
    double m = std::floor(q);
    const double r = q - m;
    if (r > 0.5 || (r == 0.5 && std::fmod(m, 2.0) != 0.0)) m += 1.0;
    return uint8_t(sign | uint8_t(m));  // (m = 8: 0x08, 2^-6)
  }
  int e = std::ilogb(a);
  const double q = (a / std::ldexp(1.0, e) - 1.0) * 8.0;
  double m = std::floor(q);
  const double r = q - m;
  if (r > 0.5 || (r == 0.5 && std::fmod(m, 2.0) != 0.0)) m += 1.0;
  if (m == 8.0) { m = 0.0; ++e; }
  const int byte = ((e + 7) << 3) | int(m);
  if (byte > 0x7E) return uint8_t(sign | 0x7E);  // (448 rounds up to 480: saturated)
  return uint8_t(sign | byte);
}
// e4m3 -> half -> float (exact; 0x7F / 0xFF NaN).
float from_e4m3(uint8_t b) {
  const float s = (b & 0x80) ? -1.f : 1.f;
  const int em = b & 0x7F;
  if (em == 0x7F) return u2f(0x7FFFFFFFu) * s;
  if (em < 8) return s * float(std::ldexp(double(em), -9));
  return s * float(std::ldexp(1.0 + (em & 7) / 8.0, (em >> 3) - 7));
}
uint32_t e4m3x2(float x0, float x1) { return uint32_t(to_e4m3(x0)) | (uint32_t(to_e4m3(x1)) << 8); }

// The GPU's fmaxf (FMNMX, max.f32): a NaN, quiet or signalling, gives the other operand (the host's
// fmaxf turns a signalling NaN into NaN).
float gpu_fmaxf(float a, float b) {
  if (std::isnan(a)) return std::isnan(b) ? u2f(0x7FFFFFFFu) : b;
  if (std::isnan(b)) return a;
  return b > a ? b : a;  // (no -0 here: absolute values and a +0 start)
}

int sw128_offset(int row, int chunk) { return row * 128 + ((chunk ^ (row % 8)) * 16); }

// HEAD's e4m3_query_exponent (fp8.cuh).
int head_k(float mx) {
  int k = 0;
  if (mx > 0.f && mx != INFINITY) {
    const int e = int((f2u(mx) >> 23) & 0xFFu) - 127;
    k = std::min(8 - e, 126);
    if (k > -126 && ldexpf(mx, k) > 448.f) k -= 1;
  }
  return k;
}
float exp2_of(int k) { return u2f(uint32_t(127 + k) << 23); }

struct Result {
  std::vector<uint8_t> q;  // Q'
  uint32_t scale[kRows];
};

// A sequence's queries: rows[q][d] bf16 bits (q_nope's 512 then q_pe's 64), rows_per_b live.
using Seq = std::vector<std::vector<uint16_t>>;

uint16_t load_bf16(const Seq& s, int q, int ch, int e) { return s[q][ch * 8 + e]; }

Result run_head(const Seq& s, int rows_per_b) {
  Result res;
  res.q.assign(kQBytes, 0xCD);
  float mxs[kRows];
  // pass 1: each thread's max, then the row's (the shuffles over 16 lanes: the max of the 16)
  for (int q = 0; q < kRows; ++q) {
    const bool live = q < rows_per_b;
    float row_mx = 0.f;
    for (int sub = 0; sub < 16; ++sub) {
      float mx = 0.f;
      for (int i = 0; i < 5; ++i) {
        const int ch = sub + 16 * i;
        for (int e = 0; e < 8; ++e) {
          const float x = (live && ch < 72) ? bf(load_bf16(s, q, ch, e)) : 0.f;
          mx = gpu_fmaxf(mx, fabsf(x));
        }
      }
      row_mx = gpu_fmaxf(row_mx, mx);
    }
    mxs[q] = row_mx;
  }
  for (int q = 0; q < kRows; ++q) {
    const bool live = q < rows_per_b;
    const int k = head_k(mxs[q]);
    const float f = ldexpf(1.f, k);
    res.scale[q] = f2u(ldexpf(1.f, -k));
    for (int sub = 0; sub < 16; ++sub) {
      for (int i = 0; i < 5; ++i) {
        const int ch = sub + 16 * i;
        if (ch >= 72) continue;
        uint32_t hi[2] = {0, 0}, lo[2] = {0, 0};
        for (int e = 0; e < 8; ++e) {
          const float x = (live ? bf(load_bf16(s, q, ch, e)) : 0.f) * f;
          const uint8_t h = std::isinf(x) ? uint8_t(0x7F) : to_e4m3(x);
          const uint8_t l = to_e4m3(x - from_e4m3(h));
          hi[e / 4] |= uint32_t(h) << (8 * (e % 4));
          lo[e / 4] |= uint32_t(l) << (8 * (e % 4));
        }
        const int col = ch * 8, blk = col / 128, within = col % 128;
        for (int h = 0; h < 2; ++h) {
          const int n = 2 * q + h;
          const int at = blk * kQBlock + sw128_offset(n, within / 16) + within % 16;
          const uint32_t w[2] = {h ? lo[0] : hi[0], h ? lo[1] : hi[1]};
          memcpy(&res.q[at], w, 8);
        }
      }
    }
  }
  return res;
}

// max.bf16x2 of one half: a NaN gives the other operand, two give the canonical NaN.
uint16_t bf16_max(uint16_t a, uint16_t b) {
  const float fa = bf(a), fb = bf(b);
  if (std::isnan(fa) && std::isnan(fb)) return 0x7FFF;
  if (std::isnan(fa)) return b;
  if (std::isnan(fb)) return a;
  return fb > fa ? b : a;  // (sign bits cleared: no -0 against +0)
}
uint32_t bf16x2_max(uint32_t a, uint32_t b) {
  return uint32_t(bf16_max(uint16_t(a), uint16_t(b))) | (uint32_t(bf16_max(uint16_t(a >> 16), uint16_t(b >> 16))) << 16);
}

long g_bad_staging = 0;

Result run_patch(const Seq& s, int rows_per_b) {
  Result res;
  res.q.assign(kQBytes, 0xCD);
  std::vector<uint8_t> xch(kXchArea, 0xEE);
  std::vector<int> owner(kXchArea, -1);  // the thread whose cp.async wrote each byte
  const int rowbytes = 2 * kDims;
  // cp.async staging: thread (q, sub) its chunks ch = sub + 16 i < 72 at 1152 q + 16 ch, zeros past
  // the sequence's rows.
  for (int t = 0; t < 256; ++t) {
    const int q = t / 16, sub = t % 16;
    const bool live = q < rows_per_b;
    for (int ch = sub; ch < 72; ch += 16) {
      const int at = q * rowbytes + 16 * ch;
      if (at < 0 || at + 16 > kXchArea) { ++g_bad_staging; continue; }
      for (int e = 0; e < 8; ++e) {
        const uint16_t v = live ? load_bf16(s, q, ch, e) : 0;
        memcpy(&xch[at + 2 * e], &v, 2);
        owner[at + 2 * e] = owner[at + 2 * e + 1] = t;
      }
    }
  }
  auto read16 = [&](int t, int at, uint32_t w[4]) {
    for (int b = 0; b < 16; ++b)
      if (owner[at + b] != t) ++g_bad_staging;
    memcpy(w, &xch[at], 16);
  };
  // the max pass, per thread, then the row's over its 16 lanes
  float mxs[kRows];
  for (int q = 0; q < kRows; ++q) {
    float row_mx = 0.f;
    for (int sub = 0; sub < 16; ++sub) {
      const int t = 16 * q + sub;
      uint32_t m2 = 0;
      for (int ch = sub; ch < 72; ch += 16) {
        uint32_t w[4];
        read16(t, q * rowbytes + 16 * ch, w);
        for (int j = 0; j < 4; ++j) m2 = bf16x2_max(m2, w[j] & 0x7FFF7FFFu);
      }
      const float mx = gpu_fmaxf(u2f(m2 << 16), u2f(m2 & 0xFFFF0000u));
      row_mx = gpu_fmaxf(row_mx, mx);
    }
    mxs[q] = row_mx;
  }
  for (int q = 0; q < kRows; ++q) {
    const float mx = mxs[q];
    int k = 0;
    if (mx > 0.f && mx != INFINITY) {
      const uint32_t bits = f2u(mx);
      const int e = int(bits >> 23);
      k = e <= 8 ? 126 : 135 - e - int((bits & 0x7FFFFFu) > 0x600000u);
      if (g_mutate == 2) k = 135 - e - int((bits & 0x7FFFFFu) >= 0x600000u);
    }
    const float f = exp2_of(std::min(k, 127));
    res.scale[q] = f2u(exp2_of(std::max(-k, -126)));
    const int w = q / 2;  // warp w holds rows 2w, 2w + 1
    const bool any_inf = mxs[2 * w] == INFINITY || mxs[2 * w + 1] == INFINITY;
    for (int sub = 0; sub < 16; ++sub) {
      const int t = 16 * q + sub;
      int out = sw128_offset(2 * q, sub / 2) + 8 * (sub % 2);
      const int lo_at = sw128_offset(2 * q + 1, sub / 2) - sw128_offset(2 * q, sub / 2);
      for (int ch = sub; ch < 72; ch += 16, out += kQBlock) {
        uint32_t w4[4];
        read16(t, q * rowbytes + 16 * ch, w4);
        uint32_t hi[2], lo[2];
        for (int h = 0; h < 2; ++h) {
          float x[4];
          for (int e = 0; e < 2; ++e) {
            x[2 * e] = u2f(w4[2 * h + e] << 16) * f;
            x[2 * e + 1] = u2f(w4[2 * h + e] & 0xFFFF0000u) * f;
          }
          hi[h] = e4m3x2(x[0], x[1]) | (e4m3x2(x[2], x[3]) << 16);
          if (any_inf && g_mutate != 1) {
            for (int e = 0; e < 4; ++e)
              if (fabsf(x[e]) == INFINITY) hi[h] = (hi[h] & ~(0xFFu << (8 * e))) | (0x7Fu << (8 * e));
          }
          float b[4];
          for (int e = 0; e < 4; ++e) b[e] = from_e4m3(uint8_t(hi[h] >> (8 * e)));
          lo[h] = e4m3x2(x[0] - b[0], x[1] - b[1]) | (e4m3x2(x[2] - b[2], x[3] - b[3]) << 16);
        }
        if (out < 0 || out + 8 > kQBytes || out + lo_at < 0 || out + lo_at + 8 > kQBytes) {
          ++g_bad_staging;
          continue;
        }
        memcpy(&res.q[out], hi, 8);
        memcpy(&res.q[out + lo_at], lo, 8);
      }
    }
  }
  return res;
}

// Rows: the patterns of wide_bitwise.py's special_queries and more.
struct Gen {
  std::mt19937_64 rng;
  explicit Gen(uint64_t seed) : rng(seed) {}
  double normal() { return std::normal_distribution<double>(0.0, 1.0)(rng); }
  double uni() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); }
  int irange(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi - 1)(rng); }
  static uint16_t bits(double x) {  // float32 -> bf16, round to nearest even
    const uint32_t u = f2u(float(x));
    if (std::isnan(float(x))) return uint16_t((u >> 16) | 0x40);
    const uint32_t r = u + 0x7FFFu + ((u >> 16) & 1u);
    return uint16_t(r >> 16);
  }
  std::vector<uint16_t> normal_row(double scale = 1.0) {
    std::vector<uint16_t> r(kDims);
    for (auto& v : r) v = bits(normal() * scale);
    return r;
  }
  void at(std::vector<uint16_t>& r, int n, uint16_t v, int lo = 0) {
    for (int i = 0; i < n; ++i) r[lo + irange(0, kDims - lo)] = v;
  }
  double tie() {  // an e4m3 rounding tie for k = 0 (or a subnormal step's halfway point)
    if (uni() < 0.6) return (1.0 + (2 * irange(0, 8) + 1) / 16.0) * std::ldexp(1.0, irange(-6, 8));
    return (irange(0, 64) + 0.5) * std::ldexp(1.0, -9);
  }
  std::vector<uint16_t> row(int pattern) {
    std::vector<uint16_t> r;
    switch (pattern) {
      case 0: return normal_row();
      case 1: r = normal_row(); at(r, 1, 0x7F80); return r;  // +inf
      case 2: r = normal_row(); at(r, 2, 0xFF80); return r;  // -inf
      case 3: r = normal_row(); at(r, 3, 0x7FC0); return r;  // NaN
      case 4: r = normal_row(); at(r, 3, 0xFFC1); return r;  // NaN, sign set, another payload
      case 5: r = normal_row(); at(r, 1, 0x7F80); at(r, 2, 0xFFC0); return r;  // inf and NaN
      case 6: r = normal_row(); at(r, 1, 0x7F80, kLatent); return r;  // +inf in the rope only
      case 7: r = normal_row(); for (int d = kLatent; d < kDims; ++d) r[d] = 0xFF80; return r;  // rope all -inf
      case 8: r.resize(kDims); for (auto& v : r) v = uni() < 0.5 ? 0x8000 : 0; return r;  // +-0
      case 9: r.assign(kDims, 0x8000); return r;  // -0 only
      case 10: r.resize(kDims); for (auto& v : r) v = uint16_t(0x7FC0 | (uni() < 0.5 ? 0x8000 : 0)); return r;  // NaN only
      case 11: r.resize(kDims); for (auto& v : r) v = uint16_t(irange(1, 0x80) | (uni() < 0.5 ? 0x8000 : 0)); return r;  // subnormals
      case 12: return normal_row(1e-38);  // tiny (normals and subnormals)
      case 13: r = normal_row(1e37); at(r, 2, 0x7F7F); return r;  // huge, bf16's largest
      case 14: r = normal_row(1e-12); at(r, 1, bits(-3e30)); return r;  // a huge value over tiny ones
      case 15: r.resize(kDims); for (auto& v : r) v = bits(tie() * (uni() < 0.5 ? -1 : 1)); at(r, 1, bits(448.0)); return r;
      case 16: r.resize(kDims); for (auto& v : r) v = bits(tie() * std::ldexp(1.0, -20)); at(r, 1, bits(448.0 * std::ldexp(1.0, -20))); return r;
      case 17: r = normal_row(); at(r, 1, bits(1.75 * 8)); return r;  // largest at 1.75 2^e: k kept
      case 18: r = normal_row(); at(r, 1, bits(1.7578125 * 8)); return r;  // just past: k - 1
      case 19: r = normal_row(std::ldexp(1.0, -122)); at(r, 1, bits(1.9 * std::ldexp(1.0, -119))); return r;  // exponent cap
      case 20: r = normal_row(std::ldexp(1.0, -121)); at(r, 1, bits(1.9 * std::ldexp(1.0, -118))); return r;  // cap, minus 1
      case 21: r.resize(kDims); for (auto& v : r) v = uint16_t(rng()); return r;  // random bits (NaN, inf, all)
      case 22: {  // random finite bits of one random exponent range
        r.resize(kDims);
        const int e0 = irange(0, 250), span = irange(1, 12);
        for (auto& v : r) v = uint16_t((uni() < 0.5 ? 0x8000 : 0) | ((std::min(254, e0 + irange(0, span))) << 7) | irange(0, 128));
        return r;
      }
      case 23: r = normal_row(std::ldexp(1.0, irange(-140, 128))); return r;  // a random scale
      case 24: {  // a subnormal among large values (the products' underflow), a random large scale
        r = normal_row(std::ldexp(1.0, irange(0, 120)));
        for (int i = 0; i < 40; ++i) r[irange(0, kDims)] = uint16_t(irange(1, 0x100) | (uni() < 0.5 ? 0x8000 : 0));
        return r;
      }
      case 25: {  // the largest |value| exactly at the k rule's edges (1.75 x 2^e, and one step either side)
        r = normal_row(std::ldexp(1.0, irange(-130, 100)));
        float m = 0.f;
        for (auto v : r) m = gpu_fmaxf(m, fabsf(bf(v)));
        const int e = std::ilogb(m) + 1;
        const uint16_t edge = bits(1.75 * std::ldexp(1.0, e));
        at(r, 1, uint16_t(edge + irange(-1, 2)));
        return r;
      }
      case 26: r = normal_row(4.0); at(r, 3, 0x7F81); at(r, 2, 0xFFA5); return r;  // signalling NaNs
      case 27: r = normal_row(); at(r, 2, 0x7F81); at(r, 1, 0xFF80); return r;  // signalling NaN and -inf
      default: return normal_row();
    }
  }
};
constexpr int kPatterns = 28;

}  // namespace

int main(int argc, char** argv) {
  const long seqs = argc > 1 ? atol(argv[1]) : 20000;
  g_mutate = argc > 2 ? atoi(argv[2]) : 0;
  long bad = 0, checked = 0;
  for (int model = 0; model < 2; ++model) {
    g_nan_model = model;
    Gen gen(61 + model);
    for (long n = 0; n < seqs; ++n) {
      Seq s(kRows);
      // a row's pattern: in turn (n * 16 + q) or at random; neighbours in a warp differ
      for (int q = 0; q < kRows; ++q) s[q] = gen.row(n < seqs / 2 ? int((n * kRows + q) % kPatterns) : gen.irange(0, kPatterns));
      const int rows_per_b = n % 3 == 0 ? kRows : gen.irange(1, kRows + 1);
      const Result a = run_head(s, rows_per_b), b = run_patch(s, rows_per_b);
      ++checked;
      const bool same = a.q == b.q && memcmp(a.scale, b.scale, sizeof a.scale) == 0;
      if (!same) {
        if (bad < 5) {
          int first = -1;
          for (int i = 0; i < kQBytes; ++i)
            if (a.q[i] != b.q[i]) { first = i; break; }
          printf("model %d seq %ld rows %d: differ (first Q' byte %d: %02x %02x)\n", model, n, rows_per_b, first,
                 first >= 0 ? a.q[first] : 0, first >= 0 ? b.q[first] : 0);
          for (int q = 0; q < kRows; ++q)
            if (a.scale[q] != b.scale[q]) printf("  row %d scale %08x %08x\n", q, a.scale[q], b.scale[q]);
        }
        ++bad;
      }
    }
  }
  printf("sequences %ld (x %d rows), mismatches %ld, staging errors %ld\n", checked, kRows, bad, g_bad_staging);
  return bad != 0 || g_bad_staging != 0;
}
