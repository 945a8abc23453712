// The nanobind module: hands Python the FFI handlers as capsules, per platform.
// jaxpaged/_extension.py registers them with XLA; nothing else crosses this boundary.
#include <nanobind/nanobind.h>

#include "xla/ffi/api/c_api.h"

namespace nb = nanobind;

extern "C" {
XLA_FFI_Error* jaxpaged_paged_attention_cpu(XLA_FFI_CallFrame*);
XLA_FFI_Error* jaxpaged_mla_decode_cpu(XLA_FFI_CallFrame*);
#ifdef JAXPAGED_WITH_GPU
XLA_FFI_Error* jaxpaged_paged_attention_gpu(XLA_FFI_CallFrame*);
XLA_FFI_Error* jaxpaged_mla_decode_gpu(XLA_FFI_CallFrame*);
#endif
}

namespace {

template <typename Fn>
nb::capsule as_capsule(Fn* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}

}  // namespace

NB_MODULE(_jaxpaged, m) {
  m.doc() = "jaxpaged's compiled XLA FFI handlers";
  // {XLA platform name: {target name: handler capsule}}.
  m.def("registrations", []() {
    nb::dict cpu;
    cpu["jaxpaged_paged_attention"] = as_capsule(jaxpaged_paged_attention_cpu);
    cpu["jaxpaged_mla_decode"] = as_capsule(jaxpaged_mla_decode_cpu);
    nb::dict out;
    out["cpu"] = cpu;
#ifdef JAXPAGED_WITH_GPU
    nb::dict gpu;
    gpu["jaxpaged_paged_attention"] = as_capsule(jaxpaged_paged_attention_gpu);
    gpu["jaxpaged_mla_decode"] = as_capsule(jaxpaged_mla_decode_gpu);
    out[JAXPAGED_GPU_PLATFORM] = gpu;
#endif
    return out;
  });
  m.def("gpu_platform", []() -> nb::object {
#ifdef JAXPAGED_WITH_GPU
    return nb::str(JAXPAGED_GPU_PLATFORM);
#else
    return nb::none();
#endif
  }, "The XLA platform the GPU handlers were built for ('CUDA' or 'ROCM'), or None.");
}
