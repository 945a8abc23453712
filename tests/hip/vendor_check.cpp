// The vendor layer (src/gpu_vendor.h) and the host launch helpers compiled as HIP for an AMD GPU:
// tests/test_hip_vendor.py builds this with hipcc (HIP_PLATFORM=amd) when hipcc is installed. No kernel
// of the project is here (their HIP ports are issue 19); this keeps the layer they will use compiling.
#include "common/block_scan.cuh"
#include "common/fp8.cuh"
#include "common/gpu_launch.h"

namespace jaxpaged {
__global__ void probe_kernel(float* out) {
  float v = out[threadIdx.x];
  v = gpu::shfl_xor(v, 1) + gpu::shfl(v, 0) + gpu::shfl_up(v, 1);
  if (gpu::any(v > 0.f)) out[threadIdx.x] = v;
  gpu::syncwarp();
  int64_t total;
  out[0] += float(block_exclusive_sum<64>(int64_t(threadIdx.x), &total));
  uint4 lo, hi;  // the fp8 cache conversion's portable path
  fp8x16_to<gpu_half>(make_uint4(threadIdx.x, 1, 2, 3), lo, hi, v > 1.f);
  out[1] += float(lo.x + hi.w);
}
int check() {
  int v = 0;
  (void)gpu::kernel_binary_version(&v, probe_kernel);
  (void)allow_smem(probe_kernel, 1024, "probe");
  return int(resident_blocks(probe_kernel, 64, 0)) + sm_count(current_device()) + v;
}
}  // namespace jaxpaged
