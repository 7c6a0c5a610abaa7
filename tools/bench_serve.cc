#include "tools/bench_serve.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "tools/bench_target.h"

namespace pagoda::cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct ServeBenchArgs {
  ClientOptions client;
  std::string api = "grpc";  // grpc | openai
  int32_t concurrency = 16, requests = 64, prompt_len = 128, gen_len = 64;
  double rate = 0;  // requests/s (Poisson); 0 = closed loop
  bool json = false;
  // Prompt seed; 0 picks a fresh one per run, so a second run does not hit the server's prefix
  // cache with the first run's prompts. Request i's prompt comes from seed + i.
  uint32_t seed = 0;
};

struct Samples {
  std::mutex mu;
  std::vector<double> ttft, itl, e2e;
  int64_t tokens = 0;
  int32_t done = 0, failed = 0;
  std::string first_error;
};

double Secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The p-th percentile (nearest rank) of `sorted`, ascending and non-empty.
double Percentile(const std::vector<double>& sorted, double p) {
  const size_t i =
      std::min(sorted.size() - 1, static_cast<size_t>(p / 100.0 * (sorted.size() - 1) + 0.5));
  return sorted[i];
}

json Stats(const std::vector<double>& v) {
  if (v.empty()) {
    return {{"mean", 0.0}, {"p50", 0.0}, {"p90", 0.0}, {"p99", 0.0}, {"count", size_t{0}}};
  }
  double sum = 0;
  for (double x : v) sum += x;
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  return {{"mean", sum / v.size()},
          {"p50", Percentile(sorted, 50)},
          {"p90", Percentile(sorted, 90)},
          {"p99", Percentile(sorted, 99)},
          {"count", v.size()}};
}

// One streamed request with a random prompt; records its latencies into `s`.
void OneRequest(BenchTarget& target, const ServeBenchArgs& a, int32_t vocab, int32_t id,
                Samples& s) {
  std::mt19937 rng(a.seed + static_cast<uint32_t>(id));
  std::vector<int32_t> prompt(a.prompt_len);
  for (int32_t& t : prompt) t = 3 + static_cast<int32_t>(rng() % (vocab - 3));
  const auto start = Clock::now();
  const StreamTiming t = target.Stream(prompt, a.gen_len);
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.done;
  if (!t.ok) {
    ++s.failed;
    if (s.first_error.empty()) s.first_error = t.error;
    return;
  }
  s.ttft.push_back(t.ttft_s);
  s.itl.insert(s.itl.end(), t.itl_s.begin(), t.itl_s.end());
  s.e2e.push_back(Secs(Clock::now() - start));
  s.tokens += t.tokens;
}

int RunServeBench(ServeBenchArgs a) {
  if (a.seed == 0) a.seed = std::random_device{}() | 1u;
  std::unique_ptr<BenchTarget> target =
      a.api == "openai" ? MakeOpenAiTarget(a.client) : MakeGrpcTarget(a.client);
  const Result<ServedModel> model = target->Model();
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s: %s\n", a.client.server.c_str(),
                 model.status().message().c_str());
    return 1;
  }
  Samples s;
  std::atomic<int32_t> next{0};
  // Poisson arrivals: request i may not start before its scheduled time.
  std::vector<Clock::duration> offsets(a.requests, Clock::duration::zero());
  std::mt19937 rng(7);
  std::exponential_distribution<double> gap(a.rate > 0 ? a.rate : 1.0);
  double t = 0;
  for (auto& o : offsets) {
    o = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t));
    if (a.rate > 0) t += gap(rng);
  }
  const auto t0 = Clock::now();
  std::vector<std::thread> workers;
  for (int32_t w = 0; w < a.concurrency; ++w) {
    workers.emplace_back([&] {
      for (int32_t i; (i = next.fetch_add(1)) < a.requests;) {
        std::this_thread::sleep_until(t0 + offsets[i]);
        OneRequest(*target, a, model->vocab_size, i, s);
      }
    });
  }
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::lock_guard<std::mutex> lock(s.mu);
    if (!a.json) std::fprintf(stderr, "\r[bench] %d/%d requests done", s.done, a.requests);
    if (s.done == a.requests) break;
  }
  for (auto& w : workers) w.join();
  const double wall = Secs(Clock::now() - t0);
  const json out = {{"server", a.client.server},
                    {"api", a.api},
                    {"model", model->name},
                    {"concurrency", a.concurrency},
                    {"requests", a.requests},
                    {"prompt_len", a.prompt_len},
                    {"seed", a.seed},
                    {"gen_len", a.gen_len},
                    {"rate", a.rate},
                    {"failed", s.failed},
                    {"first_error", s.first_error},
                    {"wall_s", wall},
                    {"generated_tokens", s.tokens},
                    {"tokens_per_s", s.tokens / wall},
                    {"ttft_s", Stats(s.ttft)},
                    {"itl_s", Stats(s.itl)},
                    {"e2e_s", Stats(s.e2e)}};
  if (!a.json) std::fprintf(stderr, "\n");
  std::cout << out.dump(a.json ? -1 : 2) << std::endl;
  return s.failed == 0 ? 0 : 1;
}

}  // namespace

void RegisterBenchServe(CLI::App* bench, int* exit_code) {
  auto a = std::make_shared<ServeBenchArgs>();
  CLI::App* cmd = bench->add_subcommand("serve", "Load-test a running server");
  cmd->add_option("--server,-s", a->client.server,
                  "Server address (default 127.0.0.1:50051, or 127.0.0.1:8000 with --api openai)");
  cmd->add_option("--api", a->api,
                  "grpc: pagoda.v1 Generate; openai: streamed POST /v1/completions (HTTP)")
      ->capture_default_str()
      ->check(CLI::IsMember({"grpc", "openai"}));
  cmd->add_option("--concurrency,-c", a->concurrency, "Concurrent streams")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--requests,-n", a->requests, "Total requests")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--prompt-len", a->prompt_len, "Prompt tokens")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--gen-len", a->gen_len, "Generated tokens")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--seed", a->seed,
                  "Prompt seed (0: a fresh one per run, so runs do not share prefix-cache hits)");
  cmd->add_option("--rate", a->rate, "Poisson arrival rate (requests/s); 0 = closed loop")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", a->json, "One-line JSON, no progress");
  AddClientFlags(cmd, a->client);
  cmd->callback([a, cmd, exit_code] {
    if (a->api == "openai" && cmd->count("--server") == 0) a->client.server = "127.0.0.1:8000";
    *exit_code = RunServeBench(*a);
  });
}

}  // namespace pagoda::cli
