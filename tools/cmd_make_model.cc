// `pagoda make-model`: writes a synthetic llama / qwen2 / qwen3 GGUF or HF directory (see
// model/make_model.h).
#include <cstdio>

#include "model/make_model.h"
#include "model/quantize.h"
#include "tools/commands.h"

namespace pagoda::cli {
namespace {

struct MakeModelArgs {
  MakeModelOptions options;
  std::string dtype = "f32";
  std::string rope_scaling = "none";
  bool quiet = false;
};

int RunMakeModel(MakeModelArgs& args) {
  // A mix name (q4_k_m, q5_k_m, ...) means that mix, selected by its base type (MixForDtype);
  // uniform types are named as GGUF names them (f32, q4_1, ...).
  const auto mix = ParseQuantMix(args.dtype);
  const auto dtype = mix ? std::optional(QuantMixBaseType(*mix)) : ParseTypeName(args.dtype);
  if (!dtype) {
    std::fprintf(stderr, "error: --dtype: '%s' (expected a type: f32, f16, bf16, q4_1, q5_1; or a mix: %s)\n",
                 args.dtype.c_str(), DescribeQuantMixes().c_str());
    return 2;
  }
  args.options.dtype = *dtype;
  auto rope = ParseRopeScalingSpec(args.rope_scaling);
  if (!rope.ok()) {
    std::fprintf(stderr, "error: %s\n", rope.status().message().c_str());
    return 2;
  }
  args.options.rope_scaling = *rope;
  Status st = MakeModel(args.options, [&](int64_t done, int64_t total) {
    if (!args.quiet)
      std::fprintf(stderr, "\r[pagoda] make-model: tensor %lld/%lld", static_cast<long long>(done),
                   static_cast<long long>(total));
  });
  if (!args.quiet) std::fprintf(stderr, "\n");
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.ToString().c_str());
    return 1;
  }
  if (!args.quiet) std::fprintf(stderr, "[pagoda] wrote %s\n", args.options.output.c_str());
  return 0;
}

}  // namespace

void RegisterMakeModel(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<MakeModelArgs>();
  CLI::App* cmd =
      app.add_subcommand("make-model", "Write a synthetic model (GGUF or HF) with random weights");
  cmd->add_option("--output,-o", args->options.output, "Output GGUF path")->required();
  cmd->add_option("--preset", args->options.preset, "tiny | small | medium")
      ->capture_default_str()
      ->check(CLI::IsMember({"tiny", "small", "medium"}));
  cmd->add_option("--dtype", args->dtype,
                  "f32 | f16 | bf16 | q4_1 | q5_1, or a `pagoda quantize` mix: q8_0 | q4_0 | q4_k_m | "
                  "q5_0 | q5_k_m | q3_k_m | q2_k | iq4_nl | iq4_xs")
      ->capture_default_str();
  cmd->add_option("--vocab-from", args->options.vocab_from,
                  "tokenizer.model or GGUF to take the vocabulary from (default: built-in "
                  "byte-level vocabulary)");
  cmd->add_option("--format", args->options.format,
                  "gguf | safetensors (a Hugging Face directory at --output with the same "
                  "weights; f32/f16/bf16 and a SentencePiece vocabulary only)")
      ->capture_default_str()
      ->check(CLI::IsMember({"gguf", "safetensors"}));
  cmd->add_option("--arch", args->options.arch,
                  "llama | qwen2 (Q/K/V biases) | qwen3 (per-head QK-norm)")
      ->capture_default_str()
      ->check(CLI::IsMember({"llama", "qwen2", "qwen3"}));
  cmd->add_option("--head-dim", args->options.head_dim, "Head dim (default hidden / heads; even)")
      ->check(CLI::Range(2, 4096));
  cmd->add_option("--rope-scaling", args->rope_scaling,
                  "none | linear:F | llama3:F[,LOW,HIGH[,ORIGINAL_CONTEXT]] (defaults 1, 4, the "
                  "context length)")
      ->capture_default_str();
  cmd->add_option("--seed", args->options.seed, "Weight seed")->capture_default_str();
  cmd->add_option("--layers", args->options.n_layers, "Override the preset's layer count")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--context", args->options.context_length, "Override the context length")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--control-tokens", args->options.control_tokens,
                  "Control tokens appended to the vocabulary, e.g. '<|im_start|>,<|im_end|>' "
                  "(not with a GGUF --vocab-from)")
      ->delimiter(',');
  cmd->add_option("--chat-template", args->options.chat_template_file,
                  "Jinja file written as tokenizer.chat_template");
  cmd->add_option("--eot-token", args->options.eot_token,
                  "Token written as tokenizer.ggml.eot_token_id (end of turn: a stop token)");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress output");
  cmd->callback([args, exit_code] { *exit_code = RunMakeModel(*args); });
}

}  // namespace pagoda::cli
