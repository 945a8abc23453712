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

// A tiled map of rank R (3-5) of `type` elements with the 128-byte swizzle (or `swizzle`): dims and
// box innermost first, strides (in bytes, multiples of 16) of dimensions 1..R-1. Returns false if
// the driver refuses it (the caller then takes a path without TMA).
template <int R>
inline bool encode_tensor_map(CUtensorMap* map, CUtensorMapDataType type, const void* base, const uint64_t (&dims)[R],
                              const uint64_t (&strides)[R - 1], const uint32_t (&box)[R],
                              CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B,
                              CUtensorMapL2promotion promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
  static_assert(R >= 3 && R <= 5, "ranks 3-5");
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
  cuuint64_t dim[R], stride[R - 1];
  cuuint32_t box_dim[R], elem_stride[R];
  for (int i = 0; i < R; ++i) {
    dim[i] = dims[i];
    box_dim[i] = box[i];
    elem_stride[i] = 1;
    if (i < R - 1) stride[i] = strides[i];
  }
  return encode(map, type, R, const_cast<void*>(base), dim, stride, box_dim, elem_stride, CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

inline bool encode_tensor_map_3d(CUtensorMap* map, CUtensorMapDataType type, const void* base,
                                 const uint64_t (&dims)[3], const uint64_t (&strides)[2], const uint32_t (&box)[3],
                                 CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
  return encode_tensor_map<3>(map, type, base, dims, strides, box, swizzle);
}

// The same for 16-bit elements (bfloat16 or float16).
inline bool encode_tensor_map_3d(CUtensorMap* map, bool bf16, const void* base, const uint64_t (&dims)[3],
                                 const uint64_t (&strides)[2], const uint32_t (&box)[3]) {
  return encode_tensor_map_3d(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, base,
                              dims, strides, box);
}

}  // namespace jaxpaged
