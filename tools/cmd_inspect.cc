// `pagoda inspect MODEL`: metadata, derived config and the tensor table of a GGUF file.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "kernels/neuron/neuron_backend.h"
#include "model/gguf.h"
#include "model/model_config.h"
#include "tools/commands.h"

namespace pagoda::cli {
namespace {

struct InspectArgs {
  std::string model;
  std::string neuron_manifest;
  bool json = false;
  bool all_metadata = false;
};

nlohmann::json ConfigJson(const ModelConfig& c) {
  return {{"architecture", c.architecture},
          {"name", c.name},
          {"n_embd", c.n_embd},
          {"n_layers", c.n_layers},
          {"n_heads", c.n_heads},
          {"n_kv_heads", c.n_kv_heads},
          {"head_dim", c.head_dim},
          {"n_ff", c.n_ff},
          {"vocab_size", c.vocab_size},
          {"context_length", c.context_length},
          {"rms_eps", c.rms_eps},
          {"rope_theta", c.rope_theta},
          {"rope_dim", c.rope_dim},
          {"rope_layout", RopeLayoutName(c.rope_layout)},
          {"tied_embeddings", c.tied_embeddings},
          {"qkv_bias", c.has_qkv_bias},
          {"bos_id", c.bos_id},
          {"eos_id", c.eos_id}};
}

int RunInspect(const InspectArgs& args) {
  if (!args.neuron_manifest.empty()) {
    const Status st = InspectNeuronManifest(args.neuron_manifest, std::cout);
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.message().c_str());
      return NeuronStartupExitCode(st, 1);
    }
    return 0;
  }
  if (args.model.empty()) {
    std::fprintf(stderr, "error: give a model file (or --neuron-manifest PATH)\n");
    return 2;
  }
  auto file = GgufFile::Open(args.model);
  if (!file.ok()) {
    std::fprintf(stderr, "error: %s\n", file.status().ToString().c_str());
    return 1;
  }
  const GgufFile& f = **file;
  auto config = ModelConfigFromGguf(f);
  nlohmann::json j;
  j["file"] = args.model;
  j["gguf_version"] = f.version();
  j["alignment"] = f.alignment();
  j["config"] = config.ok() ? ConfigJson(*config) : nlohmann::json(config.status().ToString());
  for (const auto& [key, value] : f.metadata()) {
    const bool big_array = value.type == GgufType::kArray && value.array_size() > 16;
    j["metadata"][key] =
        (big_array && !args.all_metadata) ? value.ToShortString(8) : value.ToShortString(1 << 20);
  }
  uint64_t total_bytes = 0;
  for (const GgufTensor& t : f.tensors()) {
    j["tensors"].push_back(
        {{"name", t.name}, {"type", TypeName(t.type)}, {"ne", t.ne}, {"bytes", t.nbytes}});
    total_bytes += t.nbytes;
  }
  j["tensor_bytes"] = total_bytes;
  if (args.json) {
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::printf("%s: GGUF v%u, %zu metadata keys, %zu tensors, %.2f MiB of tensor data\n",
              args.model.c_str(), f.version(), f.metadata().size(), f.tensors().size(),
              total_bytes / 1048576.0);
  std::printf("\nconfig:\n");
  for (auto& [k, v] : j["config"].items()) std::printf("  %-18s %s\n", k.c_str(), v.dump().c_str());
  std::printf("\nmetadata:\n");
  for (const auto& [key, value] : f.metadata()) {
    std::printf("  %-40s %s\n", key.c_str(),
                value.ToShortString(args.all_metadata ? 1 << 20 : 8).c_str());
  }
  std::printf("\ntensors:\n");
  for (const GgufTensor& t : f.tensors()) {
    std::printf("  %-32s %-6s %-20s %12llu bytes\n", t.name.c_str(), TypeName(t.type),
                t.ShapeString().c_str(), static_cast<unsigned long long>(t.nbytes));
  }
  return 0;
}

}  // namespace

void RegisterInspect(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show a model file's metadata and tensors");
  cmd->add_option("model", args->model, "GGUF model file");
  cmd->add_option("--neuron-manifest", args->neuron_manifest,
                  "Validate a Neuron artifacts manifest.json and print its buckets");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->add_flag("--all", args->all_metadata, "Print long metadata arrays in full");
  cmd->callback([args, exit_code] { *exit_code = RunInspect(*args); });
}

}  // namespace pagoda::cli
