// Programmatic dependent launch, device side (gpu::launch_maybe_dependent launches such a kernel).
// On sm_90 and later these are PTX's griddepcontrol instructions; elsewhere (sm_80, ROCm) they do
// nothing, and so they do in a kernel launched the plain way.
#pragma once

namespace jaxpaged {

// Waits until the kernels this one depends on (the one ahead of it in the stream) have finished
// and their memory operations are visible. Must come before any access to memory they may read or
// write.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(JAXPAGED_VENDOR_HIP)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Lets the kernel after this one in the stream start launching once every block of this grid has
// called this (or exited). It says nothing about this kernel's memory: the dependent still
// pdl_wait()s before reading what this one writes.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(JAXPAGED_VENDOR_HIP)
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace jaxpaged
