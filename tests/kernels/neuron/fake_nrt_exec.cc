// The fake libnrt's program side: nrt_load (fake NEFFs only), tensor info, nrt_execute.
#include <algorithm>
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

// A cpu-reference program of tools/neuron_build: the TorchScript archive after the header.
NRT_STATUS LoadTorchScriptModel(const std::string& name, const void* bytes, size_t size,
                                nrt_model_t** out) {
  auto m = std::make_unique<nrt_model>();
  m->id = name.substr(std::strlen(fake_nrt::kTorchScriptPrefix));
  const char* p = static_cast<const char*>(bytes);
  if (NRT_STATUS s =
          fake_nrt::LoadTorchScript(p + nn::kNeffHeaderSize, size - nn::kNeffHeaderSize, m.get());
      s != 0) {
    return s;
  }
  fake_nrt::CountProgramLoad(m->id);
  *out = m.release();
  fake_nrt::Count(fake_nrt::Event::kLoad);
  return 0;
}

}  // namespace

#ifndef FAKE_NRT_TORCHSCRIPT
// Builds without libtorch (fake_nrt, fake_nrt_stub) refuse TorchScript programs.
NRT_STATUS fake_nrt::LoadTorchScript(const char*, size_t, nrt_model*) {
  std::fprintf(stderr,
               "fake_nrt: a TorchScript program needs the libtorch build of the fake "
               "(lib/fake_nrt_torch/libnrt.so.1)\n");
  return nn::kNrtUnsupportedNeffVersion;
}
NRT_STATUS fake_nrt::ExecuteTorchScript(nrt_model*, const TensorSet&, const TensorSet&, int*) {
  return nn::kNrtInvalid;
}
#endif

extern "C" {

NRT_STATUS nrt_load(const void* bytes, size_t size, int32_t, int32_t, nrt_model_t** out) {
  if (NRT_STATUS s = fake_nrt::ReadyAndInject("nrt_load"); s != 0) return s;
  auto header = nn::ParseNeffHeader(bytes, size, "neff");
  if (header.ok() && header->name.starts_with(fake_nrt::kTorchScriptPrefix)) {
    return LoadTorchScriptModel(header->name, bytes, size, out);
  }
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

// A program's per-step inputs, as the manifest lays them out (ManifestProgram): per-token
// entries [tokens] (decode: row-major per sequence, tokens_per_seq each), block_table
// [rows][width], context_lens [rows] (0 = padding row).
struct StepInputs {
  bool decode = false;
  int32_t rows = 0, tokens = 0, tokens_per_seq = 1, width = 0, block_size = 0, slot_pad = -1;
  const int32_t *ids, *pos, *slots, *table, *ctx;
};

// The CPU step of the padded bucket inputs, and for each of its sequences the logits row of
// its first token (decode: one row per token; prefill: row 0 for the last token).
struct CpuStep {
  std::vector<int32_t> tok, slot, first_logit_row;
  std::vector<pagoda::StepSequence> seqs;
};

// Rows with context_lens > 0 hold new tokens at positions [pos[first], context_lens); every other
// token entry is padding and must carry slot_pad (so no KV is written). NRT_EXEC_BAD_INPUT else.
NRT_STATUS BuildCpuStep(const StepInputs& in, CpuStep* step) {
  const int32_t per_row = in.decode ? in.tokens_per_seq : 0;
  std::vector<bool> real(static_cast<size_t>(in.tokens), false);
  for (int32_t row = 0; row < in.rows; ++row) {
    if (in.ctx[row] <= 0) continue;
    const int32_t first = row * per_row, computed = in.pos[first];
    const int32_t n = in.ctx[row] - computed;
    if (n < 1 || n > (in.decode ? in.tokens_per_seq : in.tokens)) return nn::kNrtExecBadInput;
    pagoda::StepSequence s;
    s.query_start = static_cast<int32_t>(step->tok.size());
    s.query_len = n;
    s.num_computed_tokens = computed;
    s.block_table = std::span<const int32_t>(in.table + static_cast<size_t>(row) * in.width,
                                             (in.ctx[row] + in.block_size - 1) / in.block_size);
    s.is_decode = in.decode;
    s.num_logits = in.decode ? n : 1;
    for (int32_t i = 0; i < n; ++i) {
      if (in.pos[first + i] != computed + i) return nn::kNrtExecBadInput;
      step->tok.push_back(in.ids[first + i]);
      step->slot.push_back(in.slots[first + i]);
      real[first + i] = true;
    }
    step->seqs.push_back(s);
    step->first_logit_row.push_back(first);
  }
  for (int32_t t = 0; t < in.tokens; ++t) {
    if (!real[t] && in.slots[t] != in.slot_pad) {
      std::fprintf(stderr, "fake_nrt: padding token %d has slot %d, not slot_pad\n", t,
                   in.slots[t]);
      return nn::kNrtExecBadInput;
    }
  }
  return 0;
}

// Runs the padded bucket inputs on the CPU backend; padding rows' logits are 0. Sets *n_real to
// the number of real sequence rows.
NRT_STATUS RunDecoder(nrt_model* m, const TensorSet& in, const TensorSet& out, int* n_real) {
  const json& r = m->desc.at("roles");
  StepInputs si{m->desc.at("kind") == "decoder_step_decode",
                m->desc.at("rows"),
                m->desc.at("tokens"),
                m->desc.value("tokens_per_seq", 1),
                m->desc.at("max_ctx_blocks"),
                m->desc.at("kv").at("block_size"),
                m->desc.at("kv").value("slot_pad", -1),
                Data<int32_t>(in, r.at("input_ids")),
                Data<int32_t>(in, r.at("position_ids")),
                Data<int32_t>(in, r.at("slot_mapping")),
                Data<int32_t>(in, r.at("block_table")),
                Data<int32_t>(in, r.at("context_lens"))};
  const size_t vocab = static_cast<size_t>(m->model->config.vocab_size);
  float* logits = Data<float>(out, r.at("logits"));
  std::fill_n(logits, static_cast<size_t>(m->desc.at("logit_rows")) * vocab, 0.0f);
  CpuStep step;
  if (NRT_STATUS s = BuildCpuStep(si, &step); s != 0) return s;
  *n_real = static_cast<int>(step.seqs.size());
  if (step.seqs.empty()) return 0;
  SyncKv(m, in, true);
  size_t rows = 0;
  for (const pagoda::StepSequence& s : step.seqs) rows += s.num_logits;
  std::vector<float> got(rows * vocab);
  pagoda::StepBatch b{step.tok, step.slot, step.seqs, {}};
  pagoda::Status st = m->cpu->Execute(b, got);
  if (!st.ok()) {
    std::fprintf(stderr, "fake_nrt: bad input: %s\n", st.ToString().c_str());
    return nn::kNrtExecBadInput;
  }
  SyncKv(m, in, false);
  auto src = got.begin();
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const size_t n = static_cast<size_t>(step.seqs[i].num_logits) * vocab;
    std::copy_n(src, n, logits + static_cast<size_t>(step.first_logit_row[i]) * vocab);
    src += static_cast<std::ptrdiff_t>(n);
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
  const NRT_STATUS st = m->torch ? fake_nrt::ExecuteTorchScript(m, in, out, &real_rows)
                                 : RunDecoder(m, in, out, &real_rows);
  fake_nrt::CountProgramExecute(m->id, st == 0 ? real_rows : 0);
  if (st == 0 && std::getenv("FAKE_NRT_NAN_OUTPUT") != nullptr) {
    for (const TensorSpec& s : m->io) {
      if (s.usage != NRT_TENSOR_USAGE_OUTPUT) continue;
      auto& data = out.at(s.name)->data;
      std::fill_n(reinterpret_cast<float*>(data.data()), data.size() / 4, std::nanf(""));
    }
  }
  return st;
}
