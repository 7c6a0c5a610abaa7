// `pagoda generate`: prompts through the continuous-batching engine. One --prompt streams its
// text to stdout (or prints one JSON object with --json); --prompts-file submits every line at
// once and prints one JSON result per line, in input order.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "pagoda/v1/generation.grpc.pb.h"
#include "runtime/runtime.h"
#include "server/api_request.h"
#include "tools/commands.h"
#include "tools/constraint_flag.h"
#include "tools/grpc_client.h"
#include "tools/kernels_flag.h"
#include "tools/speculative_flag.h"

namespace pagoda::cli {
namespace {

using nlohmann::json;

struct GenerateArgs {
  std::string model;
  std::string prompt;
  std::string prompts_file;
  Request defaults;     // sampling / stopping from the flags
  SamplingGiven given;  // which sampling flags were given (the rest: the model's defaults)
  bool json = false;
  RuntimeConfig runtime;
  std::string kv_dtype = "auto";  // --kv-dtype (kv_cache.dtype)
  std::string server;             // non-empty: send to a running `pagoda serve`
  KernelFlags kernel_flags;       // --kernels, --f16-matmul
  SpeculativeFlags speculative_flags;
  ConstraintFlags constraint_flags;  // structured output, every request
  ClientOptions client;
};

struct Result1 {  // one request's collected output
  std::vector<int32_t> prompt_ids;
  std::map<int32_t, std::vector<int32_t>> tokens;
  std::map<int32_t, std::string> text;
  std::map<int32_t, FinishReason> finish;
  std::map<int32_t, std::string> error;
  Usage usage;
  RequestTimes times;
};

double Ms(EngineClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Fills `r` from one JSON line of --prompts-file (fields default to the command-line flags).
Status RequestFromJson(const json& j, const Tokenizer& tok, Request* r) {
  if (j.contains("prompt_token_ids")) {
    r->prompt_token_ids = j["prompt_token_ids"].get<std::vector<int32_t>>();
  } else if (j.contains("prompt")) {
    r->prompt_token_ids = tok.Encode(j["prompt"].get<std::string>(), tok.add_bos_by_default());
  } else {
    return InvalidArgument("each line needs \"prompt\" or \"prompt_token_ids\"");
  }
  SamplingParams& s = r->sampling;
  s.temperature = j.value("temperature", s.temperature);
  s.top_k = j.value("top_k", s.top_k);
  s.top_p = j.value("top_p", s.top_p);
  s.min_p = j.value("min_p", s.min_p);
  s.repetition_penalty = j.value("repetition_penalty", s.repetition_penalty);
  s.presence_penalty = j.value("presence_penalty", s.presence_penalty);
  s.frequency_penalty = j.value("frequency_penalty", s.frequency_penalty);
  if (j.contains("seed")) s.seed = j["seed"].get<uint64_t>();
  s.n = j.value("n", s.n);
  s.logprobs = j.value("logprobs", s.logprobs);
  s.top_logprobs = j.value("top_logprobs", s.top_logprobs);
  StoppingCriteria& st = r->stopping;
  st.max_tokens = j.value("max_tokens", st.max_tokens);
  st.stop = j.value("stop", st.stop);
  auto ids = j.value("stop_token_ids", std::vector<int32_t>{});
  st.stop_token_ids.insert(st.stop_token_ids.end(), ids.begin(), ids.end());
  st.ignore_eos = j.value("ignore_eos", st.ignore_eos);
  r->priority = j.value("priority", r->priority);
  return Status::Ok();
}

// Which sampling fields with model defaults a --prompts-file line or the flags set.
SamplingGiven GivenIn(const json& j, SamplingGiven given) {
  given.temperature |= j.contains("temperature");
  given.top_p |= j.contains("top_p");
  given.top_k |= j.contains("top_k");
  given.repetition_penalty |= j.contains("repetition_penalty");
  return given;
}

Result<std::vector<Request>> LoadRequests(const GenerateArgs& args, const Model& model) {
  const Tokenizer& tok = *model.tokenizer;
  std::vector<Request> out;
  if (args.prompts_file.empty()) {
    Request r = args.defaults;
    r.request_id = "0";
    r.prompt_token_ids = tok.Encode(args.prompt, tok.add_bos_by_default());
    ApplyModelDefaults(model.generation, args.given, &r.sampling);
    out.push_back(std::move(r));
    return out;
  }
  std::ifstream in(args.prompts_file);
  if (!in) return NotFound("--prompts-file " + args.prompts_file + ": cannot open");
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = args.prompts_file + ":" + std::to_string(line_no);
    Request r = args.defaults;
    r.request_id = std::to_string(out.size());
    try {
      const json j = json::parse(line);
      PAGODA_RETURN_IF_ERROR(RequestFromJson(j, tok, &r).WithPrefix(where));
      ApplyModelDefaults(model.generation, GivenIn(j, args.given), &r.sampling);
    } catch (const json::exception& e) {
      return InvalidArgument(where + ": " + e.what());
    }
    out.push_back(std::move(r));
  }
  return out;
}

// Appends one stream message to its request's result; echoes sample 0's text when streaming.
void Collect(const RequestOutput& o, Result1& r, bool echo) {
  auto& t = r.tokens[o.index];
  t.insert(t.end(), o.token_ids.begin(), o.token_ids.end());
  r.text[o.index] += o.text;
  if (echo && o.index == 0)
    std::fwrite(o.text.data(), 1, o.text.size(), stdout), std::fflush(stdout);
  if (o.finish_reason != FinishReason::kNone) r.finish[o.index] = o.finish_reason;
  if (!o.error.empty()) r.error[o.index] = o.error;
  if (o.request_finished) r.usage = o.usage, r.times = o.times;
}

json ResultJson(const Result1& r) {
  json j = {{"prompt_token_ids", r.prompt_ids}};
  json outputs = json::array();
  for (const auto& [i, t] : r.tokens) {
    json o = {{"index", i},
              {"token_ids", t},
              {"text", r.text.at(i)},
              {"finish_reason",
               FinishReasonName(r.finish.count(i) ? r.finish.at(i) : FinishReason::kNone)}};
    if (r.error.count(i)) o["error"] = r.error.at(i);
    outputs.push_back(o);
  }
  j["token_ids"] = outputs[0]["token_ids"];
  j["text"] = outputs[0]["text"];
  j["finish_reason"] = outputs[0]["finish_reason"];
  if (outputs.size() > 1) j["outputs"] = outputs;
  const auto& tt = r.times;
  const double prompt_ms = Ms(tt.first_token - tt.arrival);
  const double decode_ms = Ms(tt.finished - tt.first_token);
  const size_t n = r.tokens.empty() ? 0 : r.tokens.begin()->second.size();
  j["usage"] = {{"prompt_tokens", r.usage.prompt_tokens},
                {"completion_tokens", r.usage.completion_tokens},
                {"cached_prompt_tokens", r.usage.cached_prompt_tokens}};
  j["prompt_ms"] = prompt_ms;
  j["decode_ms"] = decode_ms;
  j["decode_tokens_per_s"] = (n > 1 && decode_ms > 0) ? (n - 1) * 1000.0 / decode_ms : 0.0;
  j["num_preemptions"] = tt.num_preemptions;
  return j;
}

Status Run(const GenerateArgs& args, const Model& model) {
  PAGODA_ASSIGN_OR_RETURN(auto requests, LoadRequests(args, model));
  PAGODA_ASSIGN_OR_RETURN(const grammar::ConstraintSpec constraint,
                          FlagsConstraint(args.constraint_flags));
  PAGODA_ASSIGN_OR_RETURN(auto grammar, grammar::CompileConstraint(constraint));
  for (Request& r : requests) r.grammar = grammar;
  RuntimeConfig rc = args.runtime;
  PAGODA_ASSIGN_OR_RETURN(rc.kv_cache.dtype, ParseKvDtypeOption(args.kv_dtype));
  rc.engine.max_waiting_requests =
      std::max<int32_t>(rc.engine.max_waiting_requests, requests.size());
  PAGODA_ASSIGN_OR_RETURN(Runtime rt, BuildRuntime(model, rc));
  std::vector<Result1> results(requests.size());
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < requests.size(); ++i) {
    results[i].prompt_ids = requests[i].prompt_token_ids;
    // llama2.c convention: a model that emits BOS has ended its text.
    if (model.tokenizer->bos_id() >= 0) {
      requests[i].stopping.stop_token_ids.push_back(model.tokenizer->bos_id());
    }
    auto s = rt.engine->Submit(requests[i]);
    if (!s.ok()) return s.status().WithPrefix("request " + std::to_string(i));
    streams.push_back(*s);
  }
  const bool echo = args.prompts_file.empty() && !args.json;
  if (echo) std::cout << args.prompt << std::flush;
  RequestOutput o;
  while (rt.engine->HasWork()) {
    (void)rt.engine->Step();  // backend failures finish the affected requests with "error"
    for (size_t i = 0; i < streams.size(); ++i) {
      while (streams[i]->Pop(&o, EngineClock::now())) Collect(o, results[i], echo);
    }
  }
  if (echo) std::cout << std::endl;
  for (const Result1& r : results) {
    if (args.json || !args.prompts_file.empty()) {
      std::cout << ResultJson(r).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    }
  }
  const EngineStats st = rt.engine->stats();
  const json stats = {{"kernels", rt.backend->capabilities().kernels},
                      {"steps", st.num_steps},
                      {"preemptions", st.num_preemptions},
                      {"prompt_tokens", st.prompt_tokens},
                      {"generation_tokens", st.generation_tokens},
                      {"prefix_cache_queries", st.prefix_cache_queries},
                      {"prefix_cache_hits", st.prefix_cache_hits},
                      {"spec_decode_num_drafts", st.speculative.num_drafts},
                      {"spec_decode_num_draft_tokens", st.speculative.num_draft_tokens},
                      {"spec_decode_num_accepted_tokens", st.speculative.num_accepted_tokens},
                      {"structured_output_num_masks", st.structured_output.num_masks},
                      {"structured_output_mask_seconds", st.structured_output.mask_seconds}};
  std::fprintf(stderr, "[pagoda] engine_stats %s\n", stats.dump().c_str());
  return Status::Ok();
}

Result<v1::GenerateRequest> RemoteRequest(const GenerateArgs& args) {
  v1::GenerateRequest req;
  PAGODA_ASSIGN_OR_RETURN(const grammar::ConstraintSpec constraint,
                          FlagsConstraint(args.constraint_flags));
  SetRequestConstraint(constraint, &req);
  req.set_prompt(args.prompt);
  const SamplingParams& s = args.defaults.sampling;
  v1::SamplingParams* sp = req.mutable_sampling();
  // Unset fields stay unset: the server applies the model's defaults to them.
  if (args.given.temperature) sp->set_temperature(s.temperature);
  if (args.given.top_k) sp->set_top_k(s.top_k);
  if (args.given.top_p) sp->set_top_p(s.top_p);
  if (args.given.repetition_penalty) sp->set_repetition_penalty(s.repetition_penalty);
  sp->set_min_p(s.min_p);
  if (s.seed) sp->set_seed(*s.seed);
  v1::StoppingCriteria* st = req.mutable_stopping();
  st->set_max_tokens(args.defaults.stopping.max_tokens);
  for (const std::string& stop : args.defaults.stopping.stop) st->add_stop(stop);
  st->set_ignore_eos(args.defaults.stopping.ignore_eos);
  return req;
}

// Streams one prompt through a running server's Generate RPC.
int RunRemote(const GenerateArgs& args) {
  Result<v1::GenerateRequest> request = RemoteRequest(args);
  if (!request.ok()) {
    std::fprintf(stderr, "error: %s\n", request.status().message().c_str());
    return 2;
  }
  ClientOptions o = args.client;
  o.server = args.server;
  auto stub = v1::Generation::NewStub(MakeChannel(o));
  grpc::ClientContext ctx;
  PrepareContext(o, &ctx);
  auto reader = stub->Generate(&ctx, *request);
  v1::GenerateResponse resp;
  json j = {{"token_ids", json::array()}, {"text", ""}};
  if (!args.json) std::cout << args.prompt << std::flush;
  while (reader->Read(&resp)) {
    if (resp.index() != 0) continue;
    for (int32_t t : resp.token_ids()) j["token_ids"].push_back(t);
    j["text"] = j["text"].get<std::string>() + resp.text();
    if (!args.json) std::cout << resp.text() << std::flush;
    if (!resp.finish_reason().empty()) j["finish_reason"] = resp.finish_reason();
    if (resp.has_usage()) {
      j["usage"] = {{"prompt_tokens", resp.usage().prompt_tokens()},
                    {"completion_tokens", resp.usage().completion_tokens()},
                    {"cached_prompt_tokens", resp.usage().cached_prompt_tokens()}};
    }
  }
  const grpc::Status st = reader->Finish();
  if (!st.ok()) {
    std::fprintf(stderr, "\nerror: %s: %s\n", args.server.c_str(), st.error_message().c_str());
    return 1;
  }
  if (args.json) {
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    std::cout << std::endl;
  }
  return 0;
}

int RunGenerate(GenerateArgs args) {
  if (!args.server.empty()) return RunRemote(args);
  if (Status st = ApplyKernelFlags(args.kernel_flags, &args.runtime.cpu); !st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return 2;
  }
  if (Status st = ApplySpeculativeFlags(args.speculative_flags, &args.runtime.engine.speculative);
      !st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return 2;
  }
  if (args.model.empty()) {
    std::fprintf(stderr, "error: --model is required (or --server to use a running server)\n");
    return 2;
  }
  auto model = LoadModel(args.model, [&](const std::string& stage) {
    if (!args.json) std::fprintf(stderr, "[pagoda] %s\n", stage.c_str());
  });
  Status st = model.ok() ? Run(args, **model) : model.status();
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}

// The engine / KV cache flags: each sets one config key (named in its help) and is checked by
// that key's layer when the runtime is built (runtime/runtime.h ValidateRuntimeConfig).
void AddEngineFlags(CLI::App* cmd, GenerateArgs& a) {
  RuntimeConfig& r = a.runtime;
  SchedulerConfig& s = r.engine.scheduler;
  cmd->add_option("--block-size", r.kv_cache.block_size, "kv_cache.block_size: tokens per KV block")
      ->capture_default_str();
  cmd->add_option("--kv-dtype", a.kv_dtype, "kv_cache.dtype: auto | f32 | bf16 | f16 | fp8_e4m3")
      ->capture_default_str();
  cmd->add_option("--num-blocks", r.kv_cache.num_blocks,
                  "kv_cache.num_blocks: KV cache blocks (default: sized from memory)");
  cmd->add_option("--enable-prefix-caching", r.engine.enable_prefix_caching,
                  "kv_cache.enable_prefix_caching: reuse cached prompt blocks")
      ->capture_default_str();
  cmd->add_option("--max-num-seqs", s.max_num_seqs, "engine.max_num_seqs: sequences per step")
      ->capture_default_str();
  cmd->add_option("--threads", r.cpu.threads, "backend.threads: CPU backend threads (0: per core)");
  cmd->add_option("--max-num-batched-tokens", s.max_num_batched_tokens,
                  "engine.max_num_batched_tokens: token budget per engine step")
      ->capture_default_str();
  cmd->add_option("--prefill-chunk", s.max_prefill_chunk,
                  "engine.max_prefill_chunk: prompt tokens of one sequence per step (0: the "
                  "step budget)")
      ->capture_default_str();
  cmd->add_option("--step-time-budget-percent", s.step_time_budget_percent,
                  "engine.step_time_budget_percent: while sequences decode, a step with prefill "
                  "chunks may take this % of the predicted time of a decode step of every running "
                  "and waiting sequence (0: off)")
      ->capture_default_str();
}

}  // namespace

void RegisterGenerate(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<GenerateArgs>();
  args->defaults.stopping.max_tokens = 64;
  SamplingParams& s = args->defaults.sampling;
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from prompts");
  cmd->add_option("--model,-m", args->model, "GGUF model file or Hugging Face directory");
  cmd->add_option("--server", args->server, "Send to a running `pagoda serve` at this address");
  AddClientFlags(cmd, args->client);
  auto* p = cmd->add_option("--prompt,-p", args->prompt, "Prompt text");
  cmd->add_option("--prompts-file", args->prompts_file,
                  "JSON lines: {\"prompt\" or \"prompt_token_ids\", sampling fields...}")
      ->excludes(p);
  cmd->add_option("--max-tokens,-n", args->defaults.stopping.max_tokens, "Max tokens per sample")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  // Unset, these four take the model's generation_config.json values (as `serve` does).
  CLI::Option* temperature =
      cmd->add_option("--temperature", s.temperature, "0 = greedy (default: the model's, else 1)");
  CLI::Option* top_k = cmd->add_option(
      "--top-k", s.top_k, "Keep the k most likely tokens (0 = off; default: the model's, else 0)");
  CLI::Option* top_p =
      cmd->add_option("--top-p", s.top_p, "Nucleus sampling mass (default: the model's, else 1)");
  CLI::Option* repetition_penalty = cmd->add_option(
      "--repetition-penalty", s.repetition_penalty,
      "Divide the logits of tokens already seen (1 = off; default: the model's, else 1)");
  cmd->add_option("--min-p", s.min_p, "Min probability relative to the best (0 = off)")
      ->capture_default_str();
  cmd->add_option("--seed", s.seed, "Random seed");
  cmd->add_option("--stop", args->defaults.stopping.stop, "Stop string (repeatable)");
  cmd->add_flag("--ignore-eos", args->defaults.stopping.ignore_eos, "Do not stop at EOS");
  cmd->add_flag("--json", args->json, "Print one JSON object instead of streaming text");
  AddEngineFlags(cmd, *args);
  AddKernelFlags(cmd, &args->kernel_flags);
  AddSpeculativeFlags(cmd, &args->speculative_flags);
  AddConstraintFlags(cmd, &args->constraint_flags);
  cmd->callback([=] {
    args->given = {temperature->count() > 0, top_p->count() > 0, top_k->count() > 0,
                   repetition_penalty->count() > 0};
    *exit_code = RunGenerate(*args);
  });
}

}  // namespace pagoda::cli
