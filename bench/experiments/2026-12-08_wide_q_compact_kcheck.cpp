// Session 60 (NOTES item 85 f): the check behind 2026-12-08_wide_q_compact.patch's integer k; head_k is
// src/common/fp8.cuh's e4m3_query_exponent. Build: g++ -O2 -o /tmp/kcheck THIS && /tmp/kcheck (~12 s).
// Exhaustive: the integer k (new) against e4m3_query_exponent (HEAD) for every float32 mx >= 0,
// and exp2_of(+-k) against ldexpf(1, +-k).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static int head_k(float mx) {
  int k = 0;
  if (mx > 0.f && mx != INFINITY) {
    const int e = int((f2u(mx) >> 23) & 0xFFu) - 127;
    k = std::min(8 - e, 126);
    if (k > -126 && ldexpf(mx, k) > 448.f) k -= 1;
  }
  return k;
}
static int new_k(float mx) {
  int k = 0;
  if (mx > 0.f && mx != INFINITY) {
    const uint32_t bits = f2u(mx);
    const int e = int(bits >> 23);
    k = e <= 8 ? 126 : 135 - e - int((bits & 0x7FFFFFu) > 0x600000u);
  }
  return k;
}
static float exp2_of(int k) { return u2f(uint32_t(127 + k) << 23); }
int main() {
  long bad = 0; int kmin = 1000, kmax = -1000;
  for (uint64_t u = 0; u <= 0x7F800000ull; ++u) {
    const float mx = u2f(uint32_t(u));
    const int a = head_k(mx), b = new_k(mx);
    if (a != b) { if (bad < 5) printf("mismatch %08x: %d %d\n", unsigned(u), a, b); ++bad; }
    kmin = std::min(kmin, b); kmax = std::max(kmax, b);
  }
  for (int k = -120; k <= 126; ++k)
    if (f2u(exp2_of(k)) != f2u(ldexpf(1.f, k)) || f2u(exp2_of(-k)) != f2u(ldexpf(1.f, -k))) { printf("exp2 %d\n", k); ++bad; }
  printf("mismatches %ld, k in [%d, %d]\n", bad, kmin, kmax);
  return bad != 0;
}
