// `pagoda generate`: one prompt through the model, streamed to stdout or as one JSON object.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "kernels/cpu/llama_forward.h"
#include "model/model.h"
#include "scheduler/sampler.h"
#include "tools/commands.h"

namespace pagoda::cli {
namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt;
  int32_t max_tokens = 64;
  SamplingParams sampling;
  bool json = false;
};

struct GenerateResult {
  std::vector<int32_t> prompt_ids, token_ids;
  std::string text;
  std::string finish_reason = "length";
  double prompt_ms = 0, decode_ms = 0;
};

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Greedy/sampled decode loop for one sequence. Stops at EOS, at BOS (llama2.c convention),
// at max_tokens, or when the next token would not fit in the context.
Status Generate(const Model& model, const GenerateArgs& args, GenerateResult* r) {
  const Tokenizer& tok = *model.tokenizer;
  r->prompt_ids = tok.Encode(args.prompt, tok.add_bos_by_default());
  if (r->prompt_ids.empty()) return InvalidArgument("--prompt: encodes to no tokens");
  const int32_t ctx = model.config.context_length;
  if (static_cast<int32_t>(r->prompt_ids.size()) >= ctx) {
    return InvalidArgument("--prompt: " + std::to_string(r->prompt_ids.size()) +
                           " tokens do not fit the context length " + std::to_string(ctx));
  }
  cpu::LlamaForward forward(model.config, model.weights, ctx);
  Sampler sampler(args.sampling);
  StreamingDecoder decoder(tok);
  for (int32_t id : r->prompt_ids) decoder.Push(id);

  auto start = Clock::now();
  PAGODA_ASSIGN_OR_RETURN(auto logits, forward.Forward(r->prompt_ids, false));
  r->prompt_ms = MsSince(start);
  start = Clock::now();
  while (static_cast<int32_t>(r->token_ids.size()) < args.max_tokens) {
    const int32_t next = sampler.Sample(logits);
    if (next == tok.eos_id() || next == tok.bos_id()) {
      r->finish_reason = "stop";
      break;
    }
    r->token_ids.push_back(next);
    const std::string delta = decoder.Push(next);
    r->text += delta;
    if (!args.json) std::fwrite(delta.data(), 1, delta.size(), stdout), std::fflush(stdout);
    if (static_cast<int32_t>(r->prompt_ids.size() + r->token_ids.size()) >= ctx) break;
    if (static_cast<int32_t>(r->token_ids.size()) >= args.max_tokens) break;
    const int32_t one[1] = {next};
    PAGODA_ASSIGN_OR_RETURN(logits, forward.Forward(one, false));
  }
  const std::string tail = decoder.Flush();
  r->text += tail;
  if (!args.json) std::cout << tail << std::endl;
  r->decode_ms = MsSince(start);
  return Status::Ok();
}

int RunGenerate(const GenerateArgs& args) {
  auto model = LoadModel(args.model, [&](const std::string& stage) {
    if (!args.json) std::fprintf(stderr, "[pagoda] %s\n", stage.c_str());
  });
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().ToString().c_str());
    return 1;
  }
  GenerateResult r;
  if (!args.json) std::cout << args.prompt << std::flush;
  Status st = Generate(**model, args, &r);
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.ToString().c_str());
    return 1;
  }
  const double tps = r.decode_ms > 0 ? r.token_ids.size() * 1000.0 / r.decode_ms : 0.0;
  if (args.json) {
    nlohmann::json j = {
        {"prompt_token_ids", r.prompt_ids}, {"token_ids", r.token_ids}, {"text", r.text},
        {"finish_reason", r.finish_reason}, {"prompt_ms", r.prompt_ms}, {"decode_ms", r.decode_ms},
        {"decode_tokens_per_s", tps}};
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  } else {
    std::fprintf(
        stderr,
        "[pagoda] %zu prompt tokens in %.1f ms, %zu tokens in %.1f ms (%.1f tok/s), finish: %s\n",
        r.prompt_ids.size(), r.prompt_ms, r.token_ids.size(), r.decode_ms, tps,
        r.finish_reason.c_str());
  }
  return 0;
}

}  // namespace

void RegisterGenerate(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt");
  cmd->add_option("--model,-m", args->model, "GGUF model file")->required();
  cmd->add_option("--prompt,-p", args->prompt, "Prompt text");
  cmd->add_option("--max-tokens,-n", args->max_tokens, "Maximum tokens to generate")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--temperature", args->sampling.temperature, "0 = greedy")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", args->sampling.top_k, "Keep the k most likely tokens (0 = off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", args->sampling.top_p, "Nucleus sampling mass (1 = off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", args->sampling.seed, "Random seed")->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object instead of streaming text");
  cmd->callback([args, exit_code] { *exit_code = RunGenerate(*args); });
}

}  // namespace pagoda::cli
