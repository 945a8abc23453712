// Device buffers and random bfloat16 inputs for the executables that run the kernels without JAX
// (tools/sanitize_driver.cu, tools/mla_trace.cu).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace jaxpaged_tools {

// A device buffer freed at scope exit.
template <typename T>
struct Device {
  T* ptr = nullptr;
  explicit Device(const std::vector<T>& host) {
    cudaMalloc(&ptr, std::max<size_t>(host.size(), 1) * sizeof(T));
    if (!host.empty()) cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  explicit Device(size_t n) { cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)); }
  ~Device() { cudaFree(ptr); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};

// n bfloat16 values in [-1, 1] drawn from rng; NaN where poison(i) (no draw for those).
template <typename F>
std::vector<__nv_bfloat16> random_bf16(size_t n, std::mt19937& rng, F poison) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<__nv_bfloat16> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = __float2bfloat16(poison(i) ? NAN : u(rng));
  return v;
}
inline std::vector<__nv_bfloat16> random_bf16(size_t n, std::mt19937& rng) {
  return random_bf16(n, rng, [](size_t) { return false; });
}

}  // namespace jaxpaged_tools
