// The nanobind module: hands Python the FFI handlers as capsules, per platform, and the GPU
// workspace size of each op (the one definition of each layout is in C++: workspace.h).
// jaxpaged/_extension.py registers the handlers with XLA; the ops' lowerings ask for the sizes.
#include <nanobind/nanobind.h>

#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "mla_decode/workspace.h"
#include "paged_attention/workspace.h"
#include "xla/ffi/api/c_api.h"

namespace nb = nanobind;

extern "C" {
XLA_FFI_Error* jaxpaged_paged_attention_cpu(XLA_FFI_CallFrame*);
XLA_FFI_Error* jaxpaged_paged_attention_plan_cpu(XLA_FFI_CallFrame*);
XLA_FFI_Error* jaxpaged_mla_decode_cpu(XLA_FFI_CallFrame*);
XLA_FFI_Error* jaxpaged_mla_decode_plan_cpu(XLA_FFI_CallFrame*);
XLA_FFI_Error* jaxpaged_mla_decode_sparse_cpu(XLA_FFI_CallFrame*);
XLA_FFI_Error* jaxpaged_write_rows_cpu(XLA_FFI_CallFrame*);
#ifdef JAXPAGED_WITH_GPU
XLA_FFI_Error* jaxpaged_paged_attention_gpu(XLA_FFI_CallFrame*);
XLA_FFI_Error* jaxpaged_paged_attention_plan_gpu(XLA_FFI_CallFrame*);
XLA_FFI_Error* jaxpaged_mla_decode_gpu(XLA_FFI_CallFrame*);
XLA_FFI_Error* jaxpaged_mla_decode_plan_gpu(XLA_FFI_CallFrame*);
XLA_FFI_Error* jaxpaged_mla_decode_sparse_gpu(XLA_FFI_CallFrame*);
XLA_FFI_Error* jaxpaged_write_rows_gpu(XLA_FFI_CallFrame*);
#endif
}

namespace {

template <typename Fn>
nb::capsule as_capsule(Fn* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}

int64_t paged_attention_workspace(int64_t num_tokens, int64_t num_q_heads, int64_t num_kv_heads,
                                                   int64_t head_dim, int64_t num_seqs, int64_t max_pages,
                                                   int64_t page_size, int device) {
  jaxpaged::PagedAttentionParams p{};
  p.num_tokens = num_tokens;
  p.num_q_heads = num_q_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.num_seqs = num_seqs;
  p.max_pages = max_pages;
  p.page_size = page_size;
  (void)device;  // the layout does not depend on the device
  return jaxpaged::PagedWorkspace::of(p).floats * int64_t(sizeof(float));
}

// The shapes and formats of an MLA call (MlaDecodeParams, pointers null) from the arrays' shapes
// and dtype names (numpy's: "bfloat16", "float8_e4m3fn", "uint8", ...; an empty cache dtype:
// q's, an empty kpe dtype: the ckv cache's); ds_read: how 656-byte rows are read (0 float32, 1
// bfloat16, 2 float16: the attribute of the same name).
jaxpaged::MlaDecodeParams mla_shapes(int64_t batch, int64_t s_q, int64_t num_heads, int64_t page_size,
                                     const std::string& q, const std::string& ckv, const std::string& kpe,
                                     int ds_read) {
  const std::string c = ckv.empty() ? q : ckv, k = kpe.empty() ? c : kpe;
  auto fp8 = [](const std::string& d) { return d.rfind("float8", 0) == 0; };
  jaxpaged::MlaDecodeParams p{};
  p.q_bf16 = q == "bfloat16";
  p.ds_rows = c == "uint8";
  p.set_ds_read(ds_read);
  p.fp8 = fp8(c);
  p.kv_e5m2 = c == "float8_e5m2";
  p.kpe_fp8 = p.fp8 && fp8(k);
  p.batch = batch;
  p.s_q = s_q;
  p.num_heads = num_heads;
  p.page_size = page_size;
  return p;
}

int64_t mla_workspace_of(const jaxpaged::MlaDecodeParams& p, int device) {
#ifdef JAXPAGED_WITH_GPU
  return jaxpaged::mla_decode_workspace_bytes(p, device);
#else
  (void)device;  // no GPU kernels: the sm_80 path's layout, for the record
  return jaxpaged::MlaWorkspace::of(p, jaxpaged::MlaDevice{0, false}).floats * int64_t(sizeof(float));
#endif
}

int64_t mla_decode_workspace(int64_t batch, int64_t s_q, int64_t num_heads, int64_t max_pages, int64_t page_size,
                             int device, const std::string& q_dtype, const std::string& ckv_dtype,
                             const std::string& kpe_dtype, int ds_read, int fp8_math) {
  jaxpaged::MlaDecodeParams p = mla_shapes(batch, s_q, num_heads, page_size, q_dtype, ckv_dtype, kpe_dtype, ds_read);
  p.max_pages = max_pages;
  p.fp8_math = fp8_math != 0;  // (656-byte rows: fp8_math may take the Hopper path, mla_hopper_format)
  return mla_workspace_of(p, device);
}

int64_t mla_decode_sparse_workspace(int64_t batch, int64_t s_q, int64_t num_heads, int64_t topk, int64_t page_size,
                                    int device, const std::string& q_dtype, const std::string& ckv_dtype,
                                    const std::string& kpe_dtype, int ds_read, int fp8_math) {
  jaxpaged::MlaDecodeParams p = mla_shapes(batch, s_q, num_heads, page_size, q_dtype, ckv_dtype, kpe_dtype, ds_read);
  p.fp8_math = fp8_math != 0;  // (as mla_decode_workspace's)
  return mla_workspace_of(jaxpaged::mla_sparse_as_lists(p, nullptr, nullptr, topk), device);
}

}  // namespace

NB_MODULE(_jaxpaged, m) {
  m.doc() = "jaxpaged's compiled XLA FFI handlers";
  // {XLA platform name: {target name: handler capsule}}.
  m.def("registrations", []() {
    nb::dict cpu;
    cpu["jaxpaged_paged_attention"] = as_capsule(jaxpaged_paged_attention_cpu);
    cpu["jaxpaged_paged_attention_plan"] = as_capsule(jaxpaged_paged_attention_plan_cpu);
    cpu["jaxpaged_mla_decode"] = as_capsule(jaxpaged_mla_decode_cpu);
    cpu["jaxpaged_mla_decode_plan"] = as_capsule(jaxpaged_mla_decode_plan_cpu);
    cpu["jaxpaged_mla_decode_sparse"] = as_capsule(jaxpaged_mla_decode_sparse_cpu);
    cpu["jaxpaged_write_rows"] = as_capsule(jaxpaged_write_rows_cpu);
    nb::dict out;
    out["cpu"] = cpu;
#ifdef JAXPAGED_WITH_GPU
    nb::dict gpu;
    gpu["jaxpaged_paged_attention"] = as_capsule(jaxpaged_paged_attention_gpu);
    gpu["jaxpaged_paged_attention_plan"] = as_capsule(jaxpaged_paged_attention_plan_gpu);
    gpu["jaxpaged_mla_decode"] = as_capsule(jaxpaged_mla_decode_gpu);
    gpu["jaxpaged_mla_decode_plan"] = as_capsule(jaxpaged_mla_decode_plan_gpu);
    gpu["jaxpaged_mla_decode_sparse"] = as_capsule(jaxpaged_mla_decode_sparse_gpu);
    gpu["jaxpaged_write_rows"] = as_capsule(jaxpaged_write_rows_gpu);
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
  // Workspace sizes in bytes of one GPU call. device: the GPU's ordinal, or -1 for the most that
  // any visible GPU needs.
  m.def("paged_attention_workspace_bytes", &paged_attention_workspace, nb::arg("num_tokens"),
        nb::arg("num_q_heads"), nb::arg("num_kv_heads"), nb::arg("head_dim"), nb::arg("num_seqs"),
        nb::arg("max_pages"), nb::arg("page_size"), nb::arg("device"));
  // Words of a plan (jaxpaged.paged_attention_plan) for calls of num_tokens query rows, num_seqs
  // sequences and `group` query heads per KV head, any device.
  m.def("paged_attention_plan_ints", &jaxpaged::paged_plan_ints, nb::arg("num_tokens"), nb::arg("group"),
        nb::arg("num_seqs"));
  // The dtypes as numpy names (str(x.dtype)); the caches' default to q's.
  m.def("mla_decode_workspace_bytes", &mla_decode_workspace, nb::arg("batch"), nb::arg("s_q"),
        nb::arg("num_heads"), nb::arg("max_pages"), nb::arg("page_size"), nb::arg("device"),
        nb::arg("q_dtype") = "bfloat16", nb::arg("ckv_dtype") = "", nb::arg("kpe_dtype") = "",
        nb::arg("ds_read") = 0, nb::arg("fp8_math") = 0);
  // Words of a plan (jaxpaged.mla_decode_plan) for a batch of `batch` sequences, any device.
  m.def("mla_decode_plan_ints", &jaxpaged::mla_plan_ints, nb::arg("batch"));
  m.def("mla_decode_sparse_workspace_bytes", &mla_decode_sparse_workspace, nb::arg("batch"), nb::arg("s_q"),
        nb::arg("num_heads"), nb::arg("topk"), nb::arg("page_size"), nb::arg("device"),
        nb::arg("q_dtype") = "bfloat16", nb::arg("ckv_dtype") = "", nb::arg("kpe_dtype") = "",
        nb::arg("ds_read") = 0, nb::arg("fp8_math") = 0);
}
