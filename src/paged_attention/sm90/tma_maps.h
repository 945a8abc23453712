// The copy engine's maps of an fp8 paged cache for the tile kernel's TMA loads on Hopper
// (tile_kernel.cuh, TMA instances; host side: built per call by the launcher, passed to the kernel
// as a __grid_constant__ parameter). Shared by the host and the kernel: which pages take TMA, the
// box a page is loaded in, and the order of the map's dimensions.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>

#include "common/host_device.h"
#include "common/sm90/tensor_map_host.h"
#include "paged_attention/params.h"

namespace jaxpaged {

struct PagedTmaMaps {
  CUtensorMap k, v;
};

// Rows (keys) of one box: a page, or 64 keys of a larger page (a 64-key stage then lies inside
// one page, since pages are powers of two). Pages of fewer than 16 keys keep cp.async.
constexpr int kPagedTmaMinPage = 16;
JP_HOST_DEVICE int paged_tma_box_rows(int64_t page_size) { return page_size >= 64 ? 64 : int(page_size); }

// The map's dimensions are ordered by stride, innermost first: (D, head, slot, page) for the NHD
// layout, (D, slot, head, page) for HND. True for the first.
JP_HOST_DEVICE bool paged_tma_head_inner(const PagedAttentionParams& p) { return p.head_stride <= p.slot_stride; }

// The maps of an fp8 cache with head dim 128 (bytes; boxes of 128 bytes x box_rows keys of one
// head, 128-byte swizzle: where the cp.async path puts a key's 16-byte chunks). False (the caller
// then takes cp.async) for smaller pages, a misaligned cache or a map the driver refuses.
inline bool make_paged_tma_maps(const PagedAttentionParams& p, PagedTmaMaps* maps) {
  constexpr uint64_t kRowBytes = 128;
  if (p.head_dim != int64_t(kRowBytes) || p.page_size < kPagedTmaMinPage || (p.page_size & (p.page_size - 1)) != 0 ||
      p.num_pages < 1 || p.num_kv_heads < 1) {
    return false;
  }
  const uint64_t strides_in[3] = {uint64_t(p.head_stride), uint64_t(p.slot_stride), uint64_t(p.page_stride)};
  for (uint64_t s : strides_in) {
    if (s % 16 != 0) return false;
  }
  for (const void* base : {p.k_cache, p.v_cache}) {
    if (reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
  }
  const bool head_inner = paged_tma_head_inner(p);
  const uint64_t heads = uint64_t(p.num_kv_heads), slots = uint64_t(p.page_size), pages = uint64_t(p.num_pages);
  const uint32_t rows = uint32_t(paged_tma_box_rows(p.page_size));
  const uint64_t dims[4] = {kRowBytes, head_inner ? heads : slots, head_inner ? slots : heads, pages};
  const uint64_t strides[3] = {head_inner ? strides_in[0] : strides_in[1], head_inner ? strides_in[1] : strides_in[0],
                               strides_in[2]};
  const uint32_t box[4] = {uint32_t(kRowBytes), head_inner ? 1u : rows, head_inner ? rows : 1u, 1u};
  return encode_tensor_map<4>(&maps->k, CU_TENSOR_MAP_DATA_TYPE_UINT8, p.k_cache, dims, strides, box) &&
         encode_tensor_map<4>(&maps->v, CU_TENSOR_MAP_DATA_TYPE_UINT8, p.v_cache, dims, strides, box);
}

}  // namespace jaxpaged
