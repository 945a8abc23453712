// The copy engine's maps of the MLA cache for the Hopper kernel's TMA loader (host side: built
// per call by the handler, passed to the kernel as a __grid_constant__ parameter).
#pragma once

#include <cuda.h>  // CUtensorMap

#include <type_traits>

#include "common/sm90/tensor_map_host.h"
#include "gpu_vendor.h"
#include "mla_decode/params.h"
#include "mla_decode/workspace.h"

namespace jaxpaged {

// ckv as [pages][page_size][512] and kpe as [pages][page_size][64], boxes of 64 tokens x 64 columns;
// the queries likewise, q_nope as [batch][s_q x num_heads][512] and q_pe as [batch][rows][64],
// boxes of 64 rows x 64 columns (a block's rows past its sequence's are outside the map: zeros).
struct MlaTmaMaps {
  CUtensorMap ckv, kpe, q_nope, q_pe;
};

// The maps of the call's cache (ckv and kpe with the call's strides). TMA needs pages of >= 64
// tokens (a tile is then one box per column block); false otherwise or if the driver refuses a map.
template <typename T>
bool make_tma_maps(const MlaDecodeParams& p, MlaTmaMaps* maps) {
  if (p.page_size < kMlaTileKeys || p.num_pages < 1) return false;
  constexpr bool bf16 = std::is_same<T, gpu_bf16>::value;
  const uint64_t e = sizeof(T);
  const uint32_t box[3] = {64, uint32_t(kMlaTileKeys), 1};
  const uint64_t pages = uint64_t(p.num_pages), slots = uint64_t(p.page_size);
  const uint64_t rows = uint64_t(p.s_q * p.num_heads), batch = uint64_t(p.batch);
  return encode_tensor_map_3d(&maps->ckv, bf16, p.ckv, {uint64_t(kMlaLatentDim), slots, pages},
                              {uint64_t(p.ckv_slot_stride) * e, uint64_t(p.ckv_page_stride) * e}, box) &&
         encode_tensor_map_3d(&maps->kpe, bf16, p.kpe, {uint64_t(kMlaRopeDim), slots, pages},
                              {uint64_t(p.kpe_slot_stride) * e, uint64_t(p.kpe_page_stride) * e}, box) &&
         encode_tensor_map_3d(&maps->q_nope, bf16, p.q_nope, {uint64_t(kMlaLatentDim), rows, batch},
                              {kMlaLatentDim * e, rows * kMlaLatentDim * e}, box) &&
         encode_tensor_map_3d(&maps->q_pe, bf16, p.q_pe, {uint64_t(kMlaRopeDim), rows, batch},
                              {kMlaRopeDim * e, rows * kMlaRopeDim * e}, box);
}

// The narrow fp8 kernel's map (sm90/fp8_narrow.cuh): the combined fp8 cache as bytes,
// [pages][page_size][576], boxes of 64 tokens x 128 bytes (the rope block's box reaches 64 bytes
// past each row, which the engine zero-fills without reading).
struct MlaNarrowMap {
  CUtensorMap cache;
};
inline bool make_fp8_narrow_map(const MlaDecodeParams& p, MlaNarrowMap* map) {
  if (p.page_size < kMlaTileKeys || p.num_pages < 1) return false;
  const uint32_t box[3] = {128, uint32_t(kMlaTileKeys), 1};
  return encode_tensor_map_3d(&map->cache, CU_TENSOR_MAP_DATA_TYPE_UINT8, p.ckv,
                              {uint64_t(kMlaLatentDim + kMlaRopeDim), uint64_t(p.page_size), uint64_t(p.num_pages)},
                              {uint64_t(p.ckv_slot_stride), uint64_t(p.ckv_page_stride)}, box);
}

// The wide kernel's maps of DeepSeek-V3.2's 656-byte rows (sm90/fp8_wide.cuh, kDs): the cache as
// bytes [pages][page_size][656]; `latent`: boxes of 64 tokens x 128 bytes with the 128-byte
// swizzle (the four latent blocks, as the fp8 maps'), `tail`: 64 tokens x 144 bytes from byte 512
// unswizzled (the four float32 group scales and the 64 bf16 rope values of each row).
struct MlaDsMaps {
  CUtensorMap latent, tail;
};
inline bool make_ds_maps(const MlaDecodeParams& p, MlaDsMaps* maps) {
  if (p.page_size < kMlaTileKeys || p.num_pages < 1) return false;
  const uint64_t dims[3] = {uint64_t(kMlaDsRowBytes), uint64_t(p.page_size), uint64_t(p.num_pages)};
  const uint64_t strides[2] = {uint64_t(p.ckv_slot_stride), uint64_t(p.ckv_page_stride)};
  const uint32_t latent_box[3] = {128, uint32_t(kMlaTileKeys), 1};
  const uint32_t tail_box[3] = {uint32_t(kMlaDsRowBytes - kMlaDsScalesAt), uint32_t(kMlaTileKeys), 1};
  return encode_tensor_map_3d(&maps->latent, CU_TENSOR_MAP_DATA_TYPE_UINT8, p.ckv, dims, strides, latent_box) &&
         encode_tensor_map_3d(&maps->tail, CU_TENSOR_MAP_DATA_TYPE_UINT8, p.ckv, dims, strides, tail_box,
                              CU_TENSOR_MAP_SWIZZLE_NONE);
}

}  // namespace jaxpaged
