#include "model/quantize.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>

#include "common/field_check.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"

namespace pagoda {
namespace {

// Layer index of "blk.N.*", or -1.
int LayerOf(const std::string& name) {
  if (!name.starts_with("blk.")) return -1;
  int layer = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    layer = layer * 10 + (name[i] - '0');
  }
  return layer;
}

// The type `wanted` if rows of `n` elements fit its blocks, else Q8_0 or F16.
GgmlType WithFallback(GgmlType wanted, int64_t n) {
  if (n % TypeTraits(wanted).block_size == 0) return wanted;
  return n % TypeTraits(GgmlType::kQ8_0).block_size == 0 ? GgmlType::kQ8_0 : GgmlType::kF16;
}

// One row per mix: its name, llama_ftype, and the type of the weights no rule below changes.
struct MixInfo {
  QuantMix mix;
  std::string_view name;
  uint32_t file_type;
  GgmlType base;
};
constexpr MixInfo kMixes[] = {
    {QuantMix::kQ8_0, "q8_0", 7, GgmlType::kQ8_0},
    {QuantMix::kQ4_0, "q4_0", 2, GgmlType::kQ4_0},
    {QuantMix::kQ4_K_M, "q4_k_m", 15, GgmlType::kQ4_K},
    {QuantMix::kQ5_0, "q5_0", 8, GgmlType::kQ5_0},
    {QuantMix::kQ5_K_M, "q5_k_m", 17, GgmlType::kQ5_K},
    {QuantMix::kQ3_K_M, "q3_k_m", 12, GgmlType::kQ3_K},
    {QuantMix::kQ2_K, "q2_k", 10, GgmlType::kQ2_K},
    {QuantMix::kIQ4_NL, "iq4_nl", 25, GgmlType::kIQ4_NL},
    {QuantMix::kIQ4_XS, "iq4_xs", 30, GgmlType::kIQ4_XS},
};

const MixInfo& InfoOf(QuantMix mix) {
  for (const MixInfo& m : kMixes) {
    if (m.mix == mix) return m;
  }
  return kMixes[0];  // unreachable for valid enum values
}

// llama.cpp's choice for attn_v.weight of `layer` under the mix (nullopt: the base type).
std::optional<GgmlType> AttnVType(QuantMix mix, int layer, const MixContext& ctx) {
  switch (mix) {
    case QuantMix::kQ4_K_M:
    case QuantMix::kQ5_K_M:
      if (UseMoreBits(layer, ctx.n_layers)) return GgmlType::kQ6_K;
      return std::nullopt;
    case QuantMix::kQ3_K_M:
      return layer < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    case QuantMix::kQ2_K:
      return ctx.n_gqa >= 4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
    case QuantMix::kIQ4_NL:
    case QuantMix::kIQ4_XS:
      if (ctx.n_gqa >= 4) return GgmlType::kQ5_K;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

// The same for ffn_down.weight.
std::optional<GgmlType> FfnDownType(QuantMix mix, int layer, const MixContext& ctx) {
  switch (mix) {
    case QuantMix::kQ4_K_M:
    case QuantMix::kQ5_K_M:
      if (UseMoreBits(layer, ctx.n_layers)) return GgmlType::kQ6_K;
      return std::nullopt;
    case QuantMix::kQ3_K_M:
      return layer < ctx.n_layers / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    case QuantMix::kQ2_K:
      return GgmlType::kQ3_K;
    case QuantMix::kIQ4_NL:
    case QuantMix::kIQ4_XS:
      if (layer < ctx.n_layers / 8) return GgmlType::kQ5_K;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

// The type of a 2-D weight under the mix, before the block-size fallback.
GgmlType MixWeightType(QuantMix mix, const std::string& name, const MixContext& ctx) {
  const GgmlType base = InfoOf(mix).base;
  if (mix == QuantMix::kQ8_0) return base;
  const bool is_output =
      name == "output.weight" || (!ctx.has_output && name == "token_embd.weight");
  if (is_output) return GgmlType::kQ6_K;
  const int layer = LayerOf(name);
  if (layer < 0) return base;
  std::optional<GgmlType> t;
  if (name.ends_with(".attn_v.weight")) t = AttnVType(mix, layer, ctx);
  if (name.ends_with(".ffn_down.weight")) t = FfnDownType(mix, layer, ctx);
  if (name.ends_with(".attn_output.weight")) {
    if (mix == QuantMix::kQ3_K_M) t = GgmlType::kQ4_K;
    if (mix == QuantMix::kQ2_K) t = GgmlType::kQ3_K;
  }
  return t.value_or(base);
}

MixContext ContextOf(const GgufFile& f) {
  MixContext ctx;
  ctx.has_output = f.FindTensor("output.weight") != nullptr;
  if (auto arch = f.GetString("general.architecture"); arch.ok()) {
    auto heads = f.GetInt(*arch + ".attention.head_count");
    auto kv_heads = f.GetInt(*arch + ".attention.head_count_kv");
    if (heads.ok() && kv_heads.ok() && *kv_heads > 0) {
      ctx.n_gqa = static_cast<int>(*heads / *kv_heads);
    }
  }
  for (const GgufTensor& t : f.tensors())
    ctx.n_layers = std::max(ctx.n_layers, LayerOf(t.name) + 1);
  return ctx;
}

// Converts tensor `t` (any dequantizable type) to `to`, row by row in parallel.
std::vector<uint8_t> ConvertTensor(const GgufTensor& t, GgmlType to) {
  if (t.type == to) return std::vector<uint8_t>(t.data, t.data + t.nbytes);
  const int64_t cols = t.ne.empty() ? 1 : t.ne[0];
  const int64_t rows = cols ? t.num_elements() / cols : 0;
  const int64_t in_row = *RowBytes(t.type, cols), out_row = *RowBytes(to, cols);
  std::vector<uint8_t> out(static_cast<size_t>(rows * out_row));
  tbb::parallel_for(int64_t{0}, rows, [&](int64_t r) {
    std::vector<float> row(static_cast<size_t>(cols));
    DequantizeRow(t.type, t.data + r * in_row, row.data(), cols);
    QuantizeRow(to, row.data(), out.data() + r * out_row, cols);
  });
  return out;
}

void CopyMetadata(const GgufFile& in, QuantMix mix, GgufWriter& w) {
  bool has_qversion = false;
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.file_type") continue;
    if (key == "general.alignment" && !(value.is_integer() && value.i == 32)) continue;
    if (key == "general.quantization_version") has_qversion = true;
    w.AddValue(key, value);
  }
  w.AddUint32("general.file_type", QuantMixFileType(mix));
  if (!has_qversion) w.AddUint32("general.quantization_version", 2);
}

int64_t FileSize(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

}  // namespace

std::optional<QuantMix> ParseQuantMix(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const MixInfo& m : kMixes) {
    if (lower == m.name) return m.mix;
  }
  return std::nullopt;
}

std::string DescribeQuantMixes() {
  std::vector<std::string_view> names;
  for (const MixInfo& m : kMixes) names.push_back(m.name);
  return DescribeChoices(names);
}

const char* QuantMixName(QuantMix mix) { return InfoOf(mix).name.data(); }

GgmlType QuantMixBaseType(QuantMix mix) { return InfoOf(mix).base; }

uint32_t QuantMixFileType(QuantMix mix) { return InfoOf(mix).file_type; }

std::optional<QuantMix> MixForDtype(GgmlType dtype) {
  for (const MixInfo& m : kMixes) {
    if (m.base == dtype) return m.mix;
  }
  return std::nullopt;
}

bool UseMoreBits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

GgmlType TensorTypeForMix(QuantMix mix, const std::string& name, const std::vector<int64_t>& ne,
                          const MixContext& ctx) {
  if (ne.size() < 2 || !name.ends_with("weight")) return GgmlType::kF32;
  return WithFallback(MixWeightType(mix, name, ctx), ne[0]);
}

Result<QuantizeReport> QuantizeGguf(
    const std::string& input, const std::string& output, QuantMix mix,
    const std::function<void(int64_t, int64_t, const QuantizedTensor&)>& progress) {
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> in, GgufFile::Open(input));
  const MixContext ctx = ContextOf(*in);
  GgufWriter w;
  CopyMetadata(*in, mix, w);
  QuantizeReport report{mix, FileSize(input), 0, {}};
  const auto n = static_cast<int64_t>(in->tensors().size());
  for (const GgufTensor& t : in->tensors()) {
    const GgmlTypeTraits& from = TypeTraits(t.type);
    GgmlType to = TensorTypeForMix(mix, t.name, t.ne, ctx);
    if (!from.can_dequantize) {
      if (t.ne.size() >= 2) {
        return InvalidArgument("tensor '" + t.name + "': type " + from.name +
                               " cannot be read for quantization");
      }
      to = t.type;  // e.g. an I32 vector: copied verbatim
    }
    std::vector<uint8_t> data = ConvertTensor(t, to);
    QuantizedTensor q{t.name, t.ne, t.type, to, static_cast<int64_t>(data.size())};
    PAGODA_RETURN_IF_ERROR(w.AddTensor(t.name, to, t.ne, std::move(data)));
    report.tensors.push_back(q);
    if (progress) progress(static_cast<int64_t>(report.tensors.size()), n, q);
  }
  PAGODA_RETURN_IF_ERROR(w.Write(output));
  report.output_bytes = FileSize(output);
  return report;
}

}  // namespace pagoda
