// Timeline probe of the Hopper MLA kernel (tools/mla_trace.cu; built only with JAXPAGED_MLA_TRACE,
// never in the package): the first thread of each warpgroup of blocks 0 and 1 records clock64()
// with an event id at the points the seesaw and the TMA loader mark, into MlaDecodeParams::trace
// (uint64 [2 blocks][3 roles][kMlaTraceEvents], id << 48 | clock), each role's records between two
// stamps of clock and global timer (ids 120, 121). In other builds it is empty.
#pragma once

#include <cstdint>

#include "mla_decode/params.h"

namespace jaxpaged {

constexpr int kMlaTraceEvents = 2048;
constexpr int kMlaTraceClock = 120, kMlaTraceNs = 121;  // the stamps' ids (MlaTrace::stamp)

#if defined(JAXPAGED_MLA_TRACE)
struct MlaTrace {
  uint64_t* at = nullptr;
  int n = 0;
  __device__ MlaTrace(const MlaDecodeParams& p, int role) {
    if (p.trace != nullptr && blockIdx.x < 2 && threadIdx.x % 128 == 0)
      at = p.trace + (int64_t(blockIdx.x) * 3 + role) * kMlaTraceEvents;
    stamp();
  }
  // (the role's last record: a second stamp, so the report can tell the SM clock)
  __device__ ~MlaTrace() { stamp(); }
  __device__ __forceinline__ void operator()(int id) {
    long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory");
    put(id, uint64_t(t));
  }
  // kMlaTraceClock with clock64, then kMlaTraceNs with the global timer (ns): two stamps of a role
  // give its SM clock rate over the time between them.
  __device__ __forceinline__ void stamp() {
    if (at == nullptr) return;
    (*this)(kMlaTraceClock);
    uint64_t ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns) :: "memory");
    put(kMlaTraceNs, ns);
  }
  __device__ __forceinline__ void put(int id, uint64_t v) {
    if (at != nullptr && n < kMlaTraceEvents) at[n++] = (uint64_t(id) << 48) | (v & 0xffffffffffffull);
  }
};
#else
struct MlaTrace {
  __device__ MlaTrace(const MlaDecodeParams&, int) {}
  __device__ __forceinline__ void operator()(int) const {}
};
#endif

}  // namespace jaxpaged
