// TensorSpec helpers, the expected I/O contract of a program and the NEFF header (manifest.h).
#include <cstring>

#include "kernels/neuron/manifest.h"

namespace pagoda::neuron {

Result<nrt_dtype_t> ParseDtype(const std::string& n) {
  static const std::map<std::string, nrt_dtype_t> kNames = {
      {"f32", NRT_DTYPE_FLOAT32},     {"bf16", NRT_DTYPE_BFLOAT16}, {"f16", NRT_DTYPE_FLOAT16},
      {"fp8_e4m3", NRT_DTYPE_FP8_E4}, {"i32", NRT_DTYPE_INT32},     {"i64", NRT_DTYPE_INT64},
      {"u8", NRT_DTYPE_UINT8},        {"i8", NRT_DTYPE_INT8},       {"u32", NRT_DTYPE_UINT32}};
  auto it = kNames.find(n);
  if (it == kNames.end()) return InvalidArgument("unknown dtype \"" + n + "\"");
  return it->second;
}

size_t DtypeSize(nrt_dtype_t d) {
  switch (d) {
    case NRT_DTYPE_UINT8:
    case NRT_DTYPE_INT8:
    case NRT_DTYPE_FP8_E3:
    case NRT_DTYPE_FP8_E4:
    case NRT_DTYPE_FP8_E5:
      return 1;
    case NRT_DTYPE_INT16:
    case NRT_DTYPE_UINT16:
    case NRT_DTYPE_BFLOAT16:
    case NRT_DTYPE_FLOAT16:
      return 2;
    case NRT_DTYPE_INT32:
    case NRT_DTYPE_UINT32:
    case NRT_DTYPE_FLOAT32:
    case NRT_DTYPE_FP32R:
      return 4;
    case NRT_DTYPE_INT64:
    case NRT_DTYPE_UINT64:
      return 8;
    default:
      return 0;
  }
}

const char* DtypeName(nrt_dtype_t d) {
  switch (d) {
    case NRT_DTYPE_FLOAT32:
      return "f32";
    case NRT_DTYPE_BFLOAT16:
      return "bf16";
    case NRT_DTYPE_FLOAT16:
      return "f16";
    case NRT_DTYPE_FP8_E4:
      return "fp8_e4m3";
    case NRT_DTYPE_INT32:
      return "i32";
    case NRT_DTYPE_INT64:
      return "i64";
    case NRT_DTYPE_UINT8:
      return "u8";
    case NRT_DTYPE_INT8:
      return "i8";
    case NRT_DTYPE_UINT32:
      return "u32";
    default:
      return "dtype?";
  }
}

size_t TensorSpec::bytes() const {
  size_t n = DtypeSize(dtype);
  for (uint32_t s : shape) n *= s;
  return n;
}

std::string TensorSpec::ToString() const {
  std::string s = std::string(usage == NRT_TENSOR_USAGE_INPUT ? "input " : "output ") + name + " " +
                  DtypeName(dtype) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "] (" + std::to_string(bytes()) + " bytes)";
}

std::vector<TensorSpec> ExpectedTensors(const NeuronManifest& m, const ManifestProgram& p) {
  // Per-token tensors are row-major per sequence for decode (ManifestProgram).
  const uint32_t rows = p.rows(), tokens = p.tokens(), logit_rows = p.logit_rows();
  const auto in = NRT_TENSOR_USAGE_INPUT;
  std::vector<TensorSpec> specs = {
      {p.io.at("input_ids"), in, NRT_DTYPE_INT32, {tokens}},
      {p.io.at("position_ids"), in, NRT_DTYPE_INT32, {tokens}},
      {p.io.at("slot_mapping"), in, NRT_DTYPE_INT32, {tokens}},
      {p.io.at("block_table"), in, NRT_DTYPE_INT32, {rows, uint32_t(p.max_ctx_blocks)}},
      {p.io.at("context_lens"), in, NRT_DTYPE_INT32, {rows}},
      {p.io.at("logits"),
       NRT_TENSOR_USAGE_OUTPUT,
       NRT_DTYPE_FLOAT32,
       {logit_rows, uint32_t(m.vocab)}}};
  const Result<nrt_dtype_t> kv_dtype = ParseDtype(m.kv_dtype);
  const nrt_dtype_t kv = kv_dtype.ok() ? *kv_dtype : NRT_DTYPE_UNKNOWN;
  const std::vector<uint32_t> kv_shape = {uint32_t(m.num_blocks), uint32_t(m.n_kv_heads),
                                          uint32_t(m.block_size), uint32_t(m.head_dim)};
  for (int l = 0; l < m.n_layers; ++l) {
    specs.push_back({LayerTensorName(m.k_name, l), in, kv, kv_shape});
    specs.push_back({LayerTensorName(m.v_name, l), in, kv, kv_shape});
  }
  for (const ManifestWeight& w : m.weights) {
    specs.push_back({w.name, in, *ParseDtype(w.dtype), w.shape});
  }
  return specs;
}

std::string DiffTensors(const std::vector<TensorSpec>& expected,
                        const std::vector<TensorSpec>& actual) {
  auto same = [](const TensorSpec& a, const TensorSpec& b) {
    return a.name == b.name && a.usage == b.usage && a.dtype == b.dtype && a.shape == b.shape;
  };
  std::string diff;
  for (const TensorSpec& e : expected) {
    const TensorSpec* match = nullptr;
    for (const TensorSpec& a : actual) {
      if (a.name == e.name && a.usage == e.usage) match = &a;
    }
    if (match == nullptr) {
      diff += "  - " + e.ToString() + "\n  + (absent)\n";
    } else if (!same(e, *match)) {
      diff += "  - " + e.ToString() + "\n  + " + match->ToString() + "\n";
    }
  }
  for (const TensorSpec& a : actual) {
    bool known = false;
    for (const TensorSpec& e : expected) known |= (a.name == e.name && a.usage == e.usage);
    if (!known) diff += "  - (not in the manifest)\n  + " + a.ToString() + "\n";
  }
  return diff;
}

std::vector<TensorSpec> FromTensorInfo(const nrt_tensor_info_array_t& info) {
  std::vector<TensorSpec> out;
  for (uint64_t i = 0; i < info.tensor_count; ++i) {
    const nrt_tensor_info_t& t = info.tensor_array[i];
    TensorSpec s;
    s.name.assign(t.name, strnlen(t.name, NRT_TENSOR_NAME_MAX));
    s.usage = t.usage;
    s.dtype = t.dtype;
    s.shape.assign(t.shape, t.shape + t.ndim);
    out.push_back(std::move(s));
  }
  return out;
}

Result<NeffHeader> ParseNeffHeader(const void* data, size_t size, const std::string& path) {
  if (size < kNeffHeaderSize) {
    return FailedPrecondition("neuron backend: " + path + ": " + std::to_string(size) +
                              " bytes, shorter than the 1024-byte NEFF header");
  }
  const char* p = static_cast<const char*>(data);
  NeffHeader h;
  h.name.assign(p + kNeffNameOffset, strnlen(p + kNeffNameOffset, kNeffNameSize));
  std::memcpy(&h.lnc_size, p + kNeffLncOffset, sizeof(h.lnc_size));
  return h;
}

}  // namespace pagoda::neuron
