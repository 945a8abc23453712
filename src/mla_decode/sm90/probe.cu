// Whether the runtime has an sm_90a image to run here: this unit is compiled with the Hopper
// kernels' one -gencode (sm_90a, no PTX), so a kernel of it loads exactly where they do.
#include "gpu_vendor.h"
#include "mla_decode/launch.h"

namespace jaxpaged {

__global__ void mla_sm90_probe_kernel() {}

int mla_sm90_binary_version() {
  int version = 0;
  return gpu::kernel_binary_version(&version, mla_sm90_probe_kernel) == gpu::kSuccess ? version : 0;
}

}  // namespace jaxpaged
