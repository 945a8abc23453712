// Timeline probe of the Hopper MLA kernel (tools/mla_trace.cu; built only with JAXPAGED_MLA_TRACE,
// never in the package): the first thread of each warpgroup of blocks 0 and 1 records clock64()
// with an event id at the points the seesaw and the TMA loader mark, into MlaDecodeParams::trace
// (uint64 [2 blocks][3 roles][kMlaTraceEvents], id << 48 | clock). In other builds it is empty.
#pragma once

#include <cstdint>

#include "mla_decode/params.h"

namespace jaxpaged {

constexpr int kMlaTraceEvents = 2048;

#if defined(JAXPAGED_MLA_TRACE)
struct MlaTrace {
  uint64_t* at = nullptr;
  int n = 0;
  __device__ MlaTrace(const MlaDecodeParams& p, int role) {
    if (p.trace != nullptr && blockIdx.x < 2 && threadIdx.x % 128 == 0)
      at = p.trace + (int64_t(blockIdx.x) * 3 + role) * kMlaTraceEvents;
  }
  __device__ __forceinline__ void operator()(int id) {
    if (at != nullptr && n < kMlaTraceEvents) {
      long long t;
      asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory");
      at[n++] = (uint64_t(id) << 48) | (uint64_t(t) & 0xffffffffffffull);
    }
  }
};
#else
struct MlaTrace {
  __device__ MlaTrace(const MlaDecodeParams&, int) {}
  __device__ __forceinline__ void operator()(int) const {}
};
#endif

}  // namespace jaxpaged
