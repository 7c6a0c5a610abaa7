#include "kernels/neuron/manifest.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/neuron/bucketing.h"

namespace pagoda::neuron {
namespace {

using json = nlohmann::json;

Status Bad(const std::string& path, const std::string& what) {
  return FailedPrecondition("neuron backend: manifest " + path + ": " + what);
}

// Reads obj[key] as T; error names the key path.
template <typename T>
Status Get(const json& obj, const std::string& key, const std::string& where,
           const std::string& path, T* out, bool required = true) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) {
    return required ? Bad(path, where + key + ": missing") : Status::Ok();
  }
  try {
    *out = obj[key].get<T>();
  } catch (const json::exception&) {
    return Bad(path, where + key + ": wrong type (" + obj[key].dump() + ")");
  }
  return Status::Ok();
}

Status ParseProgram(const json& j, size_t i, const std::string& path, ManifestProgram* p) {
  const std::string w = "programs[" + std::to_string(i) + "].";
  PAGODA_RETURN_IF_ERROR(Get(j, "id", w, path, &p->id));
  PAGODA_RETURN_IF_ERROR(Get(j, "phase", w, path, &p->phase));
  PAGODA_RETURN_IF_ERROR(Get(j, "neff", w, path, &p->neff));
  PAGODA_RETURN_IF_ERROR(Get(j, "max_ctx_blocks", w, path, &p->max_ctx_blocks));
  if (p->phase == "prefill") {
    PAGODA_RETURN_IF_ERROR(Get(j, "max_tokens", w, path, &p->max_tokens));
    PAGODA_RETURN_IF_ERROR(Get(j, "max_seqs", w, path, &p->max_seqs, false));
    if (p->max_seqs != 1) return Bad(path, w + "max_seqs: prefill programs take 1 sequence");
    if (p->max_tokens < 1) return Bad(path, w + "max_tokens: must be >= 1");
  } else if (p->phase == "decode") {
    PAGODA_RETURN_IF_ERROR(Get(j, "max_seqs", w, path, &p->max_seqs));
    PAGODA_RETURN_IF_ERROR(Get(j, "tokens_per_seq", w, path, &p->tokens_per_seq, false));
    if (p->max_seqs < 1) return Bad(path, w + "max_seqs: must be >= 1");
    if (p->tokens_per_seq < 1 || p->tokens_per_seq > kMaxTokensPerSeq) {
      return Bad(path, w + "tokens_per_seq: expected 1.." + std::to_string(kMaxTokensPerSeq) +
                           " (the TKG kernel's limit), got " + std::to_string(p->tokens_per_seq));
    }
    if (int64_t{p->max_seqs} * p->tokens_per_seq > std::numeric_limits<int32_t>::max()) {
      return Bad(path, w + "max_seqs: max_seqs x tokens_per_seq overflows 32 bits");
    }
  } else {
    return Bad(path, w + "phase: expected prefill or decode, got \"" + p->phase + "\"");
  }
  if (p->max_ctx_blocks < 1) return Bad(path, w + "max_ctx_blocks: must be >= 1");
  PAGODA_RETURN_IF_ERROR(Get(j, "io", w, path, &p->io));
  for (const std::string& role : IoRoles()) {
    if (!p->io.contains(role)) return Bad(path, w + "io." + role + ": missing");
  }
  return Status::Ok();
}

Status ParseKv(const json& kv, const std::string& path, NeuronManifest* m) {
  const std::string w = "kv_cache.";
  std::string layout;
  PAGODA_RETURN_IF_ERROR(Get(kv, "layout", w, path, &layout));
  if (layout != "[2][num_blocks][n_kv_heads][block_size][head_dim]") {
    return Bad(path, w + "layout: expected [2][num_blocks][n_kv_heads][block_size][head_dim]");
  }
  PAGODA_RETURN_IF_ERROR(Get(kv, "num_blocks", w, path, &m->num_blocks));
  PAGODA_RETURN_IF_ERROR(Get(kv, "block_size", w, path, &m->block_size));
  PAGODA_RETURN_IF_ERROR(Get(kv, "dtype", w, path, &m->kv_dtype));
  PAGODA_RETURN_IF_ERROR(Get(kv, "slot_pad", w, path, &m->slot_pad, false));
  PAGODA_RETURN_IF_ERROR(Get(kv, "table_pad", w, path, &m->table_pad, false));
  if (!kv.contains("tensor_names")) return Bad(path, w + "tensor_names: missing");
  PAGODA_RETURN_IF_ERROR(Get(kv["tensor_names"], "k", w + "tensor_names.", path, &m->k_name));
  PAGODA_RETURN_IF_ERROR(Get(kv["tensor_names"], "v", w + "tensor_names.", path, &m->v_name));
  if (m->num_blocks < 1) return Bad(path, w + "num_blocks: must be >= 1");
  const int32_t bs = m->block_size;
  if (bs < 1 || bs > 256 || (bs & (bs - 1)) != 0) {
    return Bad(path, w + "block_size: expected a power of two in 1..256");
  }
  if (m->kv_dtype != "f32" && m->kv_dtype != "bf16" && m->kv_dtype != "f16" &&
      m->kv_dtype != "fp8_e4m3") {
    return Bad(path, w + "dtype: expected f32, bf16, f16 or fp8_e4m3");
  }
  return Status::Ok();
}

Status ParseWeights(const json& j, const std::string& path, NeuronManifest* m) {
  PAGODA_RETURN_IF_ERROR(Get(j, "mode", "weights.", path, &m->weights_mode));
  if (m->weights_mode == "embedded") return Status::Ok();
  if (m->weights_mode != "separate") {
    return Bad(path, "weights.mode: expected embedded or separate");
  }
  if (!j.contains("tensors") || !j["tensors"].is_array()) {
    return Bad(path, "weights.tensors: missing (a list of {name, file, dtype, shape})");
  }
  for (size_t i = 0; i < j["tensors"].size(); ++i) {
    const std::string w = "weights.tensors[" + std::to_string(i) + "].";
    ManifestWeight wt;
    PAGODA_RETURN_IF_ERROR(Get(j["tensors"][i], "name", w, path, &wt.name));
    PAGODA_RETURN_IF_ERROR(Get(j["tensors"][i], "file", w, path, &wt.file));
    PAGODA_RETURN_IF_ERROR(Get(j["tensors"][i], "dtype", w, path, &wt.dtype));
    PAGODA_RETURN_IF_ERROR(Get(j["tensors"][i], "shape", w, path, &wt.shape));
    if (!ParseDtype(wt.dtype).ok()) return Bad(path, w + "dtype: unknown \"" + wt.dtype + "\"");
    m->weights.push_back(std::move(wt));
  }
  return Status::Ok();
}

Status ParseTop(const json& j, const std::string& path, NeuronManifest* m) {
  std::string format;
  PAGODA_RETURN_IF_ERROR(Get(j, "format", "", path, &format));
  if (format != kManifestFormat) {
    return Bad(path,
               "format: expected \"" + std::string(kManifestFormat) + "\", got \"" + format + "\"");
  }
  PAGODA_RETURN_IF_ERROR(Get(j, "target", "", path, &m->target));
  PAGODA_RETURN_IF_ERROR(Get(j, "lnc", "", path, &m->lnc));
  PAGODA_RETURN_IF_ERROR(Get(j, "compiler", "", path, &m->compiler, false));
  if (!j.contains("model")) return Bad(path, "model: missing");
  const json& md = j["model"];
  PAGODA_RETURN_IF_ERROR(Get(md, "arch", "model.", path, &m->arch));
  PAGODA_RETURN_IF_ERROR(Get(md, "n_layers", "model.", path, &m->n_layers));
  PAGODA_RETURN_IF_ERROR(Get(md, "vocab", "model.", path, &m->vocab));
  PAGODA_RETURN_IF_ERROR(Get(md, "n_kv_heads", "model.", path, &m->n_kv_heads));
  PAGODA_RETURN_IF_ERROR(Get(md, "head_dim", "model.", path, &m->head_dim));
  if (!j.contains("kv_cache")) return Bad(path, "kv_cache: missing");
  PAGODA_RETURN_IF_ERROR(ParseKv(j["kv_cache"], path, m));
  if (!j.contains("weights")) return Bad(path, "weights: missing");
  return ParseWeights(j["weights"], path, m);
}

}  // namespace

Result<NeuronManifest> ParseManifest(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return Bad(path, std::string("not valid JSON: ") + e.what());
  }
  NeuronManifest m;
  m.path = path;
  m.dir = std::filesystem::path(path).parent_path().string();
  PAGODA_RETURN_IF_ERROR(ParseTop(j, path, &m));
  if (!j.contains("programs") || !j["programs"].is_array() || j["programs"].empty()) {
    return Bad(path, "programs: missing or empty");
  }
  for (size_t i = 0; i < j["programs"].size(); ++i) {
    ManifestProgram p;
    PAGODA_RETURN_IF_ERROR(ParseProgram(j["programs"][i], i, path, &p));
    for (const ManifestProgram& q : m.programs) {
      if (q.id == p.id) return Bad(path, "programs[" + std::to_string(i) + "].id: duplicate");
    }
    m.programs.push_back(std::move(p));
  }
  return m;
}

Result<NeuronManifest> LoadManifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return FailedPrecondition("neuron backend: manifest " + path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParseManifest(ss.str(), path);
}

Status CheckManifestAgainstModel(const NeuronManifest& m, const ModelConfig& c) {
  auto cmp = [&](const char* key, int64_t manifest, int64_t model) -> Status {
    if (manifest == model) return Status::Ok();
    return Bad(m.path, std::string(key) + " is " + std::to_string(manifest) +
                           " but the model has " + std::to_string(model));
  };
  PAGODA_RETURN_IF_ERROR(cmp("model.n_layers", m.n_layers, c.n_layers));
  PAGODA_RETURN_IF_ERROR(cmp("model.vocab", m.vocab, c.vocab_size));
  PAGODA_RETURN_IF_ERROR(cmp("model.n_kv_heads", m.n_kv_heads, c.n_kv_heads));
  return cmp("model.head_dim", m.head_dim, c.head_dim);
}

Status CheckLnc(const NeuronManifest& m, int32_t configured) {
  if (m.lnc == configured) return Status::Ok();
  return FailedPrecondition("neuron backend: LNC mismatch: neuron.logical_nc_config is " +
                            std::to_string(configured) + " but the manifest " + m.path +
                            " was compiled for lnc " + std::to_string(m.lnc) +
                            " (recompile with -lnc " + std::to_string(configured) +
                            ", or set neuron.logical_nc_config: " + std::to_string(m.lnc) + ")");
}

Status CheckHasBothPhases(const NeuronManifest& m) {
  if (MaxContextBlocks(m.programs) > 0) return Status::Ok();
  return Bad(m.path, "needs at least one prefill and one decode program");
}

std::string LayerTensorName(const std::string& tmpl, int layer) {
  std::string out = tmpl;
  const size_t at = out.find("{layer}");
  if (at != std::string::npos) out.replace(at, 7, std::to_string(layer));
  return out;
}

}  // namespace pagoda::neuron
