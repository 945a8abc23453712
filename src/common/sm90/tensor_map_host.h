// Host side of TMA copies: encodes a CUtensorMap (the copy engine's description of a tensor in
// global memory) through the driver, reached with cudaGetDriverEntryPointByVersion so the
// extension needs no link against libcuda. Encoding is host arithmetic (no GPU work), so it is
// redone per call: a captured call bakes in the map of the buffers it was given.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_runtime.h>

#include <cstdint>

namespace jaxpaged {

// A rank-3 tiled map of `type` elements with the 128-byte swizzle (or `swizzle`): dims and box
// innermost first, strides (in bytes, multiples of 16) of dimensions 1 and 2. Returns false if the
// driver refuses it (the caller then takes a path without TMA).
inline bool encode_tensor_map_3d(CUtensorMap* map, CUtensorMapDataType type, const void* base,
                                 const uint64_t (&dims)[3], const uint64_t (&strides)[2], const uint32_t (&box)[3],
                                 CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      return PFN_cuTensorMapEncodeTiled_v12000(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (encode == nullptr) return false;
  const cuuint64_t dim[3] = {dims[0], dims[1], dims[2]};
  const cuuint64_t stride[2] = {strides[0], strides[1]};
  const cuuint32_t box_dim[3] = {box[0], box[1], box[2]};
  const cuuint32_t elem_stride[3] = {1, 1, 1};
  return encode(map, type, 3, const_cast<void*>(base), dim, stride, box_dim, elem_stride, CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The same for 16-bit elements (bfloat16 or float16).
inline bool encode_tensor_map_3d(CUtensorMap* map, bool bf16, const void* base, const uint64_t (&dims)[3],
                                 const uint64_t (&strides)[2], const uint32_t (&box)[3]) {
  return encode_tensor_map_3d(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, base,
                              dims, strides, box);
}

}  // namespace jaxpaged
