// The fake libnrt's program side: nrt_load (fake NEFFs only), tensor info, nrt_execute.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "tests/kernels/neuron/fake_nrt_internal.h"

namespace {

using json = nlohmann::json;
using fake_nrt::TensorSet;
using pagoda::neuron::TensorSpec;
namespace nn = pagoda::neuron;

NRT_STATUS BuildCpu(nrt_model* m) {
  auto model = pagoda::LoadModel(m->desc.at("model").get<std::string>());
  if (!model.ok()) {
    std::fprintf(stderr, "fake_nrt: %s\n", model.status().ToString().c_str());
    return nn::kNrtInvalid;
  }
  m->model = std::move(model).value();
  pagoda::KvCacheConfig kv;
  pagoda::StepLimits limits;
  const json& desc = m->desc.at("kv");
  kv.block_size = desc.at("block_size");
  kv.num_blocks = desc.at("num_blocks");
  kv.dtype = *pagoda::ParseKvDtype(desc.at("dtype").get<std::string>());
  limits.max_num_batched_tokens = m->desc.at("tokens");
  limits.max_num_seqs = m->desc.at("rows");
  auto cpu = pagoda::cpu::CpuBackend::Create(m->model->config, m->model->weights, kv, limits, {});
  if (!cpu.ok()) return nn::kNrtInvalid;
  m->cpu = std::move(cpu).value();
  return 0;
}

}  // namespace

extern "C" {

NRT_STATUS nrt_load(const void* bytes, size_t size, int32_t, int32_t, nrt_model_t** out) {
  if (NRT_STATUS s = fake_nrt::ReadyAndInject("nrt_load"); s != 0) return s;
  auto header = nn::ParseNeffHeader(bytes, size, "neff");
  if (!header.ok() || !header->name.starts_with("pagoda-fake:")) {
    std::fprintf(stderr, "fake_nrt: not a fake NEFF; the fake never runs real NEFFs\n");
    return nn::kNrtUnsupportedNeffVersion;
  }
  auto m = std::make_unique<nrt_model>();
  m->id = header->name.substr(std::strlen("pagoda-fake:"));
  const char* p = static_cast<const char*>(bytes);
  try {
    m->desc = json::parse(p + nn::kNeffHeaderSize, p + size);
    for (const json& t : m->desc.at("io")) {
      TensorSpec s;
      s.name = t.at("name");
      s.usage = t.at("usage") == "output" ? NRT_TENSOR_USAGE_OUTPUT : NRT_TENSOR_USAGE_INPUT;
      s.dtype = *nn::ParseDtype(t.at("dtype").get<std::string>());
      s.shape = t.at("shape").get<std::vector<uint32_t>>();
      m->io.push_back(s);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake_nrt: bad fake NEFF: %s\n", e.what());
    return nn::kNrtInvalid;
  }
  const std::string kind = m->desc.value("kind", "");
  if (!kind.starts_with("decoder_step_")) {
    std::fprintf(stderr, "fake_nrt: unknown program kind '%s'\n", kind.c_str());
    return nn::kNrtInvalid;
  }
  if (NRT_STATUS s = BuildCpu(m.get()); s != 0) return s;
  fake_nrt::CountProgramLoad(m->id);
  *out = m.release();
  fake_nrt::Count(fake_nrt::Event::kLoad);
  return 0;
}

NRT_STATUS nrt_unload(nrt_model_t* m) {
  delete m;
  fake_nrt::Count(fake_nrt::Event::kUnload);
  return 0;
}

NRT_STATUS nrt_get_model_tensor_info(nrt_model_t* m, nrt_tensor_info_array_t** out) {
  if (NRT_STATUS s = fake_nrt::ReadyAndInject("nrt_get_model_tensor_info"); s != 0) return s;
  const size_t n = m->io.size();
  auto* a = static_cast<nrt_tensor_info_array_t*>(
      std::calloc(1, sizeof(nrt_tensor_info_array_t) + n * sizeof(nrt_tensor_info_t)));
  a->tensor_count = n;
  for (size_t i = 0; i < n; ++i) {
    const TensorSpec& s = m->io[i];
    nrt_tensor_info_t& t = a->tensor_array[i];
    std::snprintf(t.name, NRT_TENSOR_NAME_MAX, "%s", s.name.c_str());
    t.usage = s.usage;
    t.size = s.bytes();
    t.dtype = s.dtype;
    t.ndim = static_cast<uint32_t>(s.shape.size());
    t.shape = static_cast<uint32_t*>(std::calloc(t.ndim + 1, sizeof(uint32_t)));
    std::copy(s.shape.begin(), s.shape.end(), t.shape);
  }
  *out = a;
  return 0;
}

NRT_STATUS nrt_free_model_tensor_info(nrt_tensor_info_array_t* a) {
  for (uint64_t i = 0; i < a->tensor_count; ++i) std::free(a->tensor_array[i].shape);
  std::free(a);
  return 0;
}

}  // extern "C"

namespace {

// Every declared tensor present in its set with exactly its size (else NRT_INVALID).
NRT_STATUS CheckBound(const nrt_model* m, const TensorSet& in, const TensorSet& out) {
  for (const TensorSpec& s : m->io) {
    const TensorSet& set = s.usage == NRT_TENSOR_USAGE_INPUT ? in : out;
    auto it = set.find(s.name);
    if (it == set.end() || it->second->data.size() != s.bytes()) {
      std::fprintf(stderr, "fake_nrt: tensor %s missing or of the wrong size\n", s.name.c_str());
      return nn::kNrtInvalid;
    }
  }
  return 0;
}

template <typename T>
T* Data(const TensorSet& set, const std::string& name) {
  return reinterpret_cast<T*>(set.at(name)->data.data());
}

// Pool <-> bound KV tensors. to_pool: copy the bound tensors into the CPU backend's pool.
void SyncKv(nrt_model* m, const TensorSet& in, bool to_pool) {
  pagoda::KvPool& pool = m->cpu->kv_pool();
  const json& kv = m->desc.at("kv");
  for (int l = 0; l < m->model->config.n_layers; ++l) {
    const std::string names[2] = {nn::LayerTensorName(kv.at("k"), l),
                                  nn::LayerTensorName(kv.at("v"), l)};
    for (int v = 0; v < 2; ++v) {
      std::vector<std::byte>& t = in.at(names[v])->data;
      std::byte* p = pool.layer_data(l) + v * t.size();
      if (to_pool) {
        std::memcpy(p, t.data(), t.size());
      } else {
        std::memcpy(t.data(), p, t.size());
      }
    }
  }
}

// Builds the CPU step from the padded bucket inputs: rows with context_lens 0 are padding.
// Sets *n_real to the number of the others.
NRT_STATUS RunDecoder(nrt_model* m, const TensorSet& in, const TensorSet& out, int* n_real) {
  const json& r = m->desc.at("roles");
  const bool decode = m->desc.at("kind") == "decoder_step_decode";
  const int32_t rows = m->desc.at("rows"), width = m->desc.at("max_ctx_blocks");
  const int32_t bs = m->desc.at("kv").at("block_size");
  const int32_t vocab = m->model->config.vocab_size;
  const auto* ids = Data<int32_t>(in, r.at("input_ids"));
  const auto* pos = Data<int32_t>(in, r.at("position_ids"));
  const auto* slots = Data<int32_t>(in, r.at("slot_mapping"));
  const auto* table = Data<int32_t>(in, r.at("block_table"));
  const auto* ctx = Data<int32_t>(in, r.at("context_lens"));
  float* logits = Data<float>(out, r.at("logits"));
  std::fill_n(logits, static_cast<size_t>(rows) * vocab, 0.0f);
  std::vector<int32_t> tok, slot;
  std::vector<pagoda::StepSequence> seqs;
  std::vector<int32_t> real_rows;
  for (int32_t row = 0; row < rows; ++row) {
    if (ctx[row] <= 0) continue;
    const int32_t first = decode ? row : 0;
    const int32_t computed = pos[first];
    const int32_t n = ctx[row] - computed;
    pagoda::StepSequence s;
    s.query_start = static_cast<int32_t>(tok.size());
    s.query_len = n;
    s.num_computed_tokens = computed;
    s.block_table = std::span<const int32_t>(table + static_cast<size_t>(row) * width,
                                             (ctx[row] + bs - 1) / bs);
    s.is_decode = decode;
    for (int32_t i = 0; i < n; ++i) {
      if (pos[first + i] != computed + i) return nn::kNrtExecBadInput;
      tok.push_back(ids[first + i]);
      slot.push_back(slots[first + i]);
    }
    seqs.push_back(s);
    real_rows.push_back(row);
  }
  *n_real = static_cast<int>(seqs.size());
  if (seqs.empty()) return 0;
  SyncKv(m, in, true);
  std::vector<float> got(seqs.size() * vocab);
  pagoda::StepBatch b{tok, slot, seqs, {}};
  pagoda::Status st = m->cpu->Execute(b, got);
  if (!st.ok()) {
    std::fprintf(stderr, "fake_nrt: bad input: %s\n", st.ToString().c_str());
    return nn::kNrtExecBadInput;
  }
  SyncKv(m, in, false);
  for (size_t i = 0; i < real_rows.size(); ++i) {
    std::copy_n(got.begin() + i * vocab, vocab, logits + static_cast<size_t>(real_rows[i]) * vocab);
  }
  return 0;
}

// Clears `flag` when the execution ends.
struct BusyGuard {
  std::atomic<bool>& flag;
  ~BusyGuard() { flag = false; }
};

}  // namespace

// The stub build (missing-symbol test) exports this under another name.
#ifdef FAKE_NRT_OMIT_EXECUTE
#define FAKE_NRT_EXECUTE fake_nrt_execute_omitted
#else
#define FAKE_NRT_EXECUTE nrt_execute
#endif
extern "C" NRT_STATUS FAKE_NRT_EXECUTE(nrt_model_t* m, const nrt_tensor_set_t* in_set,
                                       nrt_tensor_set_t* out_set) {
  if (NRT_STATUS s = fake_nrt::ReadyAndInject("nrt_execute"); s != 0) return s;
  if (m->busy.exchange(true)) {
    std::fprintf(stderr, "fake_nrt: concurrent nrt_execute on one model\n");
    if (fake_nrt::Strict()) std::abort();
  }
  BusyGuard guard{m->busy};
  fake_nrt::Count(fake_nrt::Event::kExecute);
  const auto& in = *static_cast<const TensorSet*>(in_set);
  const auto& out = *static_cast<const TensorSet*>(out_set);
  if (NRT_STATUS s = CheckBound(m, in, out); s != 0) return s;
  int real_rows = 0;
  const NRT_STATUS st = RunDecoder(m, in, out, &real_rows);
  fake_nrt::CountProgramExecute(m->id, st == 0 ? real_rows : 0);
  if (st == 0 && std::getenv("FAKE_NRT_NAN_OUTPUT") != nullptr) {
    const std::string logits = m->desc.at("roles").at("logits");
    auto& data = out.at(logits)->data;
    std::fill_n(reinterpret_cast<float*>(data.data()), data.size() / 4, std::nanf(""));
  }
  return st;
}
