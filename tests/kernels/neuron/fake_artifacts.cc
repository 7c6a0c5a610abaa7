#include "tests/kernels/neuron/fake_artifacts.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/neuron/manifest.h"

namespace pagoda::testing {
namespace {

using json = nlohmann::json;

json Manifest(const FakeArtifactOptions& o) {
  json programs = json::array();
  for (const FakeBucket& b : o.buckets) {
    json p = {{"id", b.id},
              {"phase", b.decode ? "decode" : "prefill"},
              {"neff", b.id + ".neff"},
              {"max_ctx_blocks", b.ctx_blocks},
              {"io",
               {{"input_ids", "input_ids"},
                {"position_ids", "position_ids"},
                {"slot_mapping", "slot_mapping"},
                {"block_table", "block_table"},
                {"context_lens", "computed_context_lens"},
                {"logits", "logits"}}},
              {"state", {"kv.*", "w.*"}}};
    p[b.decode ? "max_seqs" : "max_tokens"] = b.size;
    if (b.decode) p["tokens_per_seq"] = b.tokens_per_seq;
    if (!b.decode) p["max_seqs"] = 1;
    programs.push_back(p);
  }
  const ModelConfig& c = o.config;
  return {{"format", neuron::kManifestFormat},
          {"target", "trn2"},
          {"lnc", o.lnc},
          {"compiler", "fake"},
          {"model",
           {{"arch", "llama"},
            {"n_layers", c.n_layers},
            {"vocab", o.manifest_vocab != 0 ? o.manifest_vocab : c.vocab_size},
            {"n_kv_heads", c.n_kv_heads},
            {"head_dim", c.head_dim}}},
          {"kv_cache",
           {{"layout", "[2][num_blocks][n_kv_heads][block_size][head_dim]"},
            {"num_blocks", o.num_blocks},
            {"block_size", o.block_size},
            {"dtype", o.kv_dtype},
            {"tensor_names", {{"k", "kv.{layer}.k"}, {"v", "kv.{layer}.v"}}},
            {"slot_pad", -1},
            {"table_pad", -1}}},
          {"weights",
           {{"mode", "separate"},
            {"tensors",
             {{{"name", "w.marker"}, {"file", "weights.bin"}, {"dtype", "u8"}, {"shape", {16}}}}}}},
          {"programs", programs}};
}

json Descriptor(const neuron::NeuronManifest& m, const neuron::ManifestProgram& p,
                const FakeArtifactOptions& o) {
  json io = json::array();
  for (const neuron::TensorSpec& s : neuron::ExpectedTensors(m, p)) {
    std::vector<uint32_t> shape = s.shape;
    if (p.id == o.wrong_shape_program && s.name == "input_ids") ++shape[0];
    io.push_back({{"name", s.name},
                  {"usage", s.usage == NRT_TENSOR_USAGE_INPUT ? "input" : "output"},
                  {"dtype", neuron::DtypeName(s.dtype)},
                  {"shape", shape}});
  }
  return {{"kind", p.is_decode() ? "decoder_step_decode" : "decoder_step_prefill"},
          {"model", o.model_path},
          {"rows", p.rows()},
          {"tokens", p.tokens()},
          {"tokens_per_seq", p.tokens_per_seq},
          {"logit_rows", p.logit_rows()},
          {"max_ctx_blocks", p.max_ctx_blocks},
          {"roles", p.io},
          {"kv",
           {{"k", m.k_name},
            {"v", m.v_name},
            {"num_blocks", m.num_blocks},
            {"block_size", m.block_size},
            {"dtype", m.kv_dtype},
            {"slot_pad", m.slot_pad}}},
          {"io", io}};
}

Status WriteNeff(const std::string& path, const std::string& name, uint32_t lnc,
                 const std::string& body) {
  std::string header(neuron::kNeffHeaderSize, '\0');
  std::memcpy(header.data() + neuron::kNeffNameOffset, name.data(),
              std::min(name.size(), neuron::kNeffNameSize - 1));
  std::memcpy(header.data() + neuron::kNeffLncOffset, &lnc, sizeof(lnc));
  std::ofstream out(path, std::ios::binary);
  out << header << body;
  return out ? Status::Ok() : Internal("cannot write " + path);
}

}  // namespace

Status WriteFakeArtifacts(const std::string& dir, const FakeArtifactOptions& o) {
  const json manifest = Manifest(o);
  std::ofstream(dir + "/manifest.json") << manifest.dump(2);
  std::ofstream(dir + "/weights.bin", std::ios::binary) << std::string(16, '\x2a');
  PAGODA_ASSIGN_OR_RETURN(neuron::NeuronManifest m,
                          neuron::ParseManifest(manifest.dump(), dir + "/manifest.json"));
  for (const neuron::ManifestProgram& p : m.programs) {
    PAGODA_RETURN_IF_ERROR(WriteNeff(dir + "/" + p.neff, "pagoda-fake:" + p.id,
                                     static_cast<uint32_t>(o.header_lnc),
                                     Descriptor(m, p, o).dump()));
  }
  return Status::Ok();
}

}  // namespace pagoda::testing
