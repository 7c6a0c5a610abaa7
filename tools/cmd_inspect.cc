// `pagoda inspect MODEL`: what a model is -- architecture, dims, RoPE (layout and scaling),
// attention options, tokenizer kind and pre-tokenizer, special tokens, chat templates, the
// generation defaults (stop tokens, sampling), metadata and the tensor table -- for a GGUF file
// or a Hugging Face directory (opened as every command opens models: model/model.h), as text or
// JSON.
//
// JSON (--json): file, format ("gguf" | "hf"), config {architecture, name, n_embd, n_layers,
// n_heads, n_kv_heads, head_dim, n_ff, vocab_size, context_length, rms_eps, rope_theta,
// rope_dim, rope_layout, tied_embeddings, qkv_bias, qk_norm, sliding_window, bos_id, eos_id,
// eos_ids}, rope {base, dim, layout, scaling {type, factor, low_freq_factor, high_freq_factor,
// original_context, source}}, tokenizer {type, pre_tokenizer, vocab_size, add_bos},
// special_tokens {bos, eos, eot, pad, unk: {id, text}} (id -1 when absent), chat_template
// {present, chars, parses, error (when it does not parse), named: [names]}, generation
// {stop_token_ids, stop_tokens (texts), pad_id, temperature, top_p, top_k, repetition_penalty
// (what a request that leaves them unset gets), from_model (the names of those the model's
// generation_config.json sets)}, tensors [{name, type,
// shape (row-major), bytes; GGUF also ne}], tensor_bytes; GGUF: gguf_version, alignment,
// metadata; HF: hf_config (config.json). When the model does not load, "error" says why and the
// sections that need a loaded model are absent.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "common/json_depth.h"
#include "kernels/neuron/neuron_backend.h"
#include "model/chat/jinja.h"
#include "model/gguf.h"
#include "model/hf_model.h"
#include "model/model.h"
#include "model/model_config.h"
#include "runtime/runtime.h"
#include "server/api_request.h"
#include "tools/commands.h"

namespace pagoda::cli {
namespace {

using Json = nlohmann::json;

struct InspectArgs {
  std::string model;
  std::string neuron_manifest;
  bool json = false;
  bool all_metadata = false;
};

Json ConfigJson(const ModelConfig& c) {
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
          {"qk_norm", c.has_qk_norm},
          {"sliding_window", c.sliding_window},
          {"bos_id", c.bos_id},
          {"eos_id", c.eos_id},
          {"eos_ids", c.eos_ids}};
}

Json RopeJson(const ModelConfig& c, bool gguf) {
  Json scaling = {{"type", RopeScalingName(c.rope_scaling)}};
  if (c.rope_scaling != RopeScaling::kNone) {
    scaling["factor"] = c.rope_scaling_factor;
    scaling["source"] = !c.rope_freq_factors.empty() ? "rope_freqs.weight"
                        : gguf                       ? "metadata"
                                                     : "config.json";
  }
  if (c.rope_original_context > 0) scaling["original_context"] = c.rope_original_context;
  if (c.rope_scaling == RopeScaling::kLlama3 && c.rope_freq_factors.empty()) {
    scaling["low_freq_factor"] = c.rope_low_freq_factor;
    scaling["high_freq_factor"] = c.rope_high_freq_factor;
  }
  if (!c.rope_freq_factors.empty()) scaling["freq_factors"] = c.rope_freq_factors;
  return {{"base", c.rope_theta},
          {"dim", c.rope_dim},
          {"layout", RopeLayoutName(c.rope_layout)},
          {"scaling", scaling}};
}

Json TokenJson(const Tokenizer& tok, int32_t id) {
  if (id < 0 || id >= tok.vocab_size()) return {{"id", -1}, {"text", ""}};
  return {{"id", id}, {"text", std::string(tok.Piece(id))}};
}

Json ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Json();
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  if (!CheckJsonDepth(text, path).ok()) return Json();  // the loader reports it
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? Json() : j;
}

Json ChatTemplateJson(const Model& m) {
  Json named = Json::array();
  for (const auto& [name, _] : m.named_chat_templates) named.push_back(name);
  Json j = {
      {"present", !m.chat_template.empty()}, {"chars", m.chat_template.size()}, {"named", named}};
  if (!m.chat_template.empty()) {
    auto parsed = jinja::Template::Parse(m.chat_template);
    j["parses"] = parsed.ok();
    if (!parsed.ok()) j["error"] = parsed.status().message();
  }
  return j;
}

Json GenerationJson(const Model& m) {
  const GenerationDefaults& g = m.generation;
  Json texts = Json::array();
  for (int32_t id : g.stop_token_ids) texts.push_back(std::string(m.tokenizer->Piece(id)));
  Json from_model = Json::array();
  if (g.temperature) from_model.push_back("temperature");
  if (g.top_p) from_model.push_back("top_p");
  if (g.top_k) from_model.push_back("top_k");
  if (g.repetition_penalty) from_model.push_back("repetition_penalty");
  const SamplingParams s = DefaultSampling(g);
  return {{"stop_token_ids", g.stop_token_ids},
          {"stop_tokens", texts},
          {"pad_id", g.pad_id},
          {"temperature", s.temperature},
          {"top_p", s.top_p},
          {"top_k", s.top_k},
          {"repetition_penalty", s.repetition_penalty},
          {"from_model", from_model}};
}

// tokenizer, special_tokens, chat_template and generation sections of a loaded model.
void AddTokenizerSections(const Model& m, Json* j) {
  const Tokenizer& tok = *m.tokenizer;
  (*j)["tokenizer"] = {{"type", std::string(tok.type_name())},
                       {"pre_tokenizer", std::string(tok.pre_tokenizer_name())},
                       {"vocab_size", tok.vocab_size()},
                       {"add_bos", tok.add_bos_by_default()}};
  (*j)["chat_template"] = ChatTemplateJson(m);
  // The first stop token that is not EOS: the end-of-turn token.
  int32_t eot = -1;
  for (int32_t id : m.generation.stop_token_ids) {
    if (eot < 0 && id != tok.eos_id()) eot = id;
  }
  (*j)["special_tokens"] = {{"bos", TokenJson(tok, tok.bos_id())},
                            {"eos", TokenJson(tok, tok.eos_id())},
                            {"eot", TokenJson(tok, eot)},
                            {"pad", TokenJson(tok, m.generation.pad_id)},
                            {"unk", TokenJson(tok, tok.unk_id())}};
  (*j)["generation"] = GenerationJson(m);
}

// Loads the model for the sections that need it and returns it (`hf_config`: an HF model's
// config.json, null for a GGUF); records the error and returns null otherwise.
std::unique_ptr<Model> AddModelSections(const std::string& path, bool gguf, Json* j) {
  auto model = LoadModel(path);
  if (!model.ok()) {
    (*j)["error"] = model.status().ToString();
    return nullptr;
  }
  const ModelConfig& c = (*model)->config;
  (*j)["config"] = ConfigJson(c);
  (*j)["rope"] = RopeJson(c, gguf);
  AddTokenizerSections(**model, j);
  return std::move(model).value();
}

Json InspectGguf(const std::string& path, const GgufFile& f, bool all_metadata) {
  Json j = {{"file", path}, {"format", "gguf"}};
  j["gguf_version"] = f.version();
  j["alignment"] = f.alignment();
  if (!AddModelSections(path, true, &j)) {
    // The config alone, when it parses, for a model that does not load.
    if (auto config = ModelConfigFromGguf(f); config.ok()) {
      j["config"] = ConfigJson(*config);
      j["rope"] = RopeJson(*config, true);
    }
  }
  for (const auto& [key, value] : f.metadata()) {
    const bool big_array = value.type == GgufType::kArray && value.array_size() > 16;
    j["metadata"][key] =
        (big_array && !all_metadata) ? value.ToShortString(8) : value.ToShortString(1 << 20);
  }
  uint64_t total_bytes = 0;
  j["tensors"] = Json::array();
  for (const GgufTensor& t : f.tensors()) {
    j["tensors"].push_back({{"name", t.name},
                            {"type", TypeName(t.type)},
                            {"shape", std::vector<int64_t>(t.ne.rbegin(), t.ne.rend())},
                            {"ne", t.ne},
                            {"bytes", t.nbytes}});
    total_bytes += t.nbytes;
  }
  j["tensor_bytes"] = total_bytes;
  return j;
}

Json InspectHf(const std::string& dir) {
  Json j = {{"file", dir}, {"format", "hf"}};
  const Json hf_config = ReadJsonFile(dir + "/config.json");
  j["hf_config"] = hf_config;
  const std::unique_ptr<Model> model = AddModelSections(dir, false, &j);
  // The loaded model's shards, else the tensor table alone when it opens.
  std::unique_ptr<SafetensorsSet> opened;
  const SafetensorsSet* set = model ? model->safetensors.get() : nullptr;
  if (!set) {
    auto open = SafetensorsSet::OpenDir(dir);
    if (!open.ok()) {
      if (!j.contains("error")) j["error"] = open.status().ToString();
      return j;
    }
    opened = std::move(open).value();
    set = opened.get();
  }
  uint64_t total_bytes = 0;
  j["tensors"] = Json::array();
  for (const SafetensorsTensor* t : set->AllTensors()) {
    j["tensors"].push_back(
        {{"name", t->name}, {"type", t->dtype}, {"shape", t->shape}, {"bytes", t->nbytes()}});
    total_bytes += t->nbytes();
  }
  j["tensor_bytes"] = total_bytes;
  return j;
}

// Text-mode output of values read from the model: invalid UTF-8 (a special token's bytes) is
// printed as U+FFFD instead of making nlohmann throw.
std::string Dump(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }
std::string Str(const Json& v) { return v.is_string() ? v.get<std::string>() : Dump(v); }

void PrintModelText(const Json& j) {
  const Json& c = j["config"];
  std::printf("\nmodel:\n  architecture   %s (%s)\n", Str(c["architecture"]).c_str(),
              Str(c["name"]).c_str());
  std::printf("  dims           hidden %s, layers %s, heads %s, kv heads %s, head_dim %s, ffn %s\n",
              Str(c["n_embd"]).c_str(), Str(c["n_layers"]).c_str(), Str(c["n_heads"]).c_str(),
              Str(c["n_kv_heads"]).c_str(), Str(c["head_dim"]).c_str(), Str(c["n_ff"]).c_str());
  std::printf("  vocab          %s, context length %s, tied embeddings %s\n",
              Str(c["vocab_size"]).c_str(), Str(c["context_length"]).c_str(),
              Str(c["tied_embeddings"]).c_str());
  if (j.contains("rope")) {
    const Json& r = j["rope"];
    Json scaling = r["scaling"];
    if (scaling.contains("freq_factors")) scaling["freq_factors"] = scaling["freq_factors"].size();
    std::printf("  rope           base %s, dim %s, %s, scaling %s\n", Str(r["base"]).c_str(),
                Str(r["dim"]).c_str(), Str(r["layout"]).c_str(), Dump(scaling).c_str());
  }
  std::printf("  attention      sliding window %s, qk_norm %s, qkv bias %s, rms eps %s\n",
              Str(c["sliding_window"]).c_str(), Str(c["qk_norm"]).c_str(),
              Str(c["qkv_bias"]).c_str(), Str(c["rms_eps"]).c_str());
  if (!j.contains("tokenizer")) return;
  const Json& t = j["tokenizer"];
  std::printf("  tokenizer      %s, pre-tokenizer '%s', %s tokens, add_bos %s\n",
              Str(t["type"]).c_str(), Str(t["pre_tokenizer"]).c_str(), Str(t["vocab_size"]).c_str(),
              Str(t["add_bos"]).c_str());
  for (const char* name : {"bos", "eos", "eot", "pad", "unk"}) {
    const Json& s = j["special_tokens"][name];
    std::printf("  %-14s %s %s\n", name, Str(s["id"]).c_str(), Dump(s["text"]).c_str());
  }
  const Json& ct = j["chat_template"];
  std::printf("  chat template  %s\n",
              !ct["present"].get<bool>() ? "none"
              : ct["parses"].get<bool>()
                  ? (Str(ct["chars"]) + " chars" +
                     (ct["named"].empty() ? "" : ", named: " + ct["named"].dump()))
                        .c_str()
                  : ("does not parse: " + Str(ct["error"])).c_str());
  const Json& g = j["generation"];
  std::printf("  stop tokens    %s %s\n", g["stop_token_ids"].dump().c_str(),
              g["stop_tokens"].dump().c_str());
  std::printf(
      "  sampling       temperature %s, top_p %s, top_k %s, repetition_penalty %s "
      "(from the model: %s)\n",
      Str(g["temperature"]).c_str(), Str(g["top_p"]).c_str(), Str(g["top_k"]).c_str(),
      Str(g["repetition_penalty"]).c_str(), g["from_model"].dump().c_str());
}

void PrintText(const Json& j, bool all_metadata, const GgufFile* f) {
  std::printf("%s: %s, %zu tensors, %.2f MiB of tensor data\n", Str(j["file"]).c_str(),
              Str(j["format"]).c_str(), j.value("tensors", Json::array()).size(),
              j.value("tensor_bytes", uint64_t{0}) / 1048576.0);
  if (j.contains("error")) std::printf("\nerror: %s\n", Str(j["error"]).c_str());
  if (j.contains("config")) PrintModelText(j);
  if (f) {
    std::printf("\nmetadata:\n");
    for (const auto& [key, value] : f->metadata()) {
      std::printf("  %-40s %s\n", key.c_str(),
                  value.ToShortString(all_metadata ? 1 << 20 : 8).c_str());
    }
  }
  std::printf("\ntensors:\n");
  for (const Json& t : j.value("tensors", Json::array())) {
    std::printf("  %-40s %-6s %-20s %12s bytes\n", Str(t["name"]).c_str(), Str(t["type"]).c_str(),
                Dump(t["shape"]).c_str(), Str(t["bytes"]).c_str());
  }
}

int RunInspect(const InspectArgs& args) {
  if (!args.neuron_manifest.empty()) {
    const Status st = InspectNeuronManifest(args.neuron_manifest, std::cout);
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.message().c_str());
      return StartupExitCode(BackendStartupError(st));
    }
    return 0;
  }
  if (args.model.empty()) {
    std::fprintf(stderr, "error: give a model file or directory (or --neuron-manifest PATH)\n");
    return 2;
  }
  auto kind = ClassifyModelPath(args.model);
  if (kind.ok() &&
      (*kind == ModelPathKind::kTokenizerJson || *kind == ModelPathKind::kSentencePiece)) {
    kind = InvalidArgument(args.model +
                           ": a tokenizer file, not a model (expected a GGUF file "
                           "or a Hugging Face model directory)");
  }
  if (!kind.ok()) {
    std::fprintf(stderr, "error: %s\n", kind.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<GgufFile> file;
  if (*kind == ModelPathKind::kGguf) {
    auto opened = GgufFile::Open(args.model);
    if (!opened.ok()) {
      std::fprintf(stderr, "error: %s\n", opened.status().ToString().c_str());
      return 1;
    }
    file = std::move(opened).value();
  }
  const Json report =
      file ? InspectGguf(args.model, *file, args.all_metadata) : InspectHf(args.model);
  if (args.json) {
    std::cout << report.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
  } else {
    PrintText(report, args.all_metadata, file.get());
  }
  return 0;
}

}  // namespace

void RegisterInspect(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Show a model's architecture, RoPE, tokenizer, special tokens and tensors");
  cmd->add_option("model", args->model, "GGUF model file or Hugging Face model directory");
  cmd->add_option("--neuron-manifest", args->neuron_manifest,
                  "Validate a Neuron artifacts manifest.json and print its buckets");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->add_flag("--all", args->all_metadata, "Print long metadata arrays in full");
  cmd->callback([args, exit_code] { *exit_code = RunInspect(*args); });
}

}  // namespace pagoda::cli
