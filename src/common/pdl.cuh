// Programmatic dependent launch, device side (launch_chained in common/gpu_launch.h launches such a
// kernel). In code compiled for sm_90 or later these are PTX's griddepcontrol instructions; in code
// compiled for earlier targets (the sm_80 image, compute_80 PTX) and for ROCm they are compiled out
// - launch_chained then launches plainly, so a dependent launch never runs a kernel without its
// wait. In a kernel launched the plain way they do nothing.
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
