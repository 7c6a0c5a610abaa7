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

#include "pagoda/v1/generation.grpc.pb.h"
#include "tools/grpc_client.h"

namespace pagoda::cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct ServeBenchArgs {
  ClientOptions client;
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

// One streamed request; records its latencies into `s`.
void OneRequest(v1::Generation::Stub& stub, const ServeBenchArgs& a, int32_t vocab, int32_t id,
                Samples& s) {
  std::mt19937 rng(a.seed + static_cast<uint32_t>(id));
  v1::GenerateRequest req;
  for (int32_t i = 0; i < a.prompt_len; ++i) {
    req.mutable_prompt_token_ids()->add_ids(3 + static_cast<int32_t>(rng() % (vocab - 3)));
  }
  req.mutable_sampling()->set_temperature(0);
  req.mutable_stopping()->set_max_tokens(a.gen_len);
  req.mutable_stopping()->set_ignore_eos(true);
  grpc::ClientContext ctx;
  PrepareContext(a.client, &ctx);
  const auto start = Clock::now();
  auto reader = stub.Generate(&ctx, req);
  v1::GenerateResponse resp;
  std::vector<double> itl;
  double ttft = -1;
  auto last = start;
  int64_t tokens = 0;
  while (reader->Read(&resp)) {
    const int n = resp.token_ids_size();
    if (n == 0) continue;
    const auto now = Clock::now();
    if (ttft < 0) {
      ttft = Secs(now - start);
    } else {
      for (int k = 0; k < n; ++k) itl.push_back(Secs(now - last) / n);
    }
    last = now;
    tokens += n;
  }
  const grpc::Status st = reader->Finish();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.done;
  if (!st.ok()) {
    ++s.failed;
    if (s.first_error.empty()) s.first_error = st.error_message();
    return;
  }
  s.ttft.push_back(ttft);
  s.itl.insert(s.itl.end(), itl.begin(), itl.end());
  s.e2e.push_back(Secs(Clock::now() - start));
  s.tokens += tokens;
}

int RunServeBench(ServeBenchArgs a) {
  if (a.seed == 0) a.seed = std::random_device{}() | 1u;
  auto stub = v1::Generation::NewStub(MakeChannel(a.client));
  v1::ModelInfo info;
  {
    grpc::ClientContext ctx;
    PrepareContext(a.client, &ctx);
    const grpc::Status st = stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s: %s\n", a.client.server.c_str(), st.error_message().c_str());
      return 1;
    }
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
        OneRequest(*stub, a, info.vocab_size(), i, s);
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
                    {"model", info.model_name()},
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
  CLI::App* cmd = bench->add_subcommand("serve", "Load-test a running server over gRPC");
  cmd->add_option("--server,-s", a->client.server, "Server address")->capture_default_str();
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
  cmd->callback([a, exit_code] { *exit_code = RunServeBench(*a); });
}

}  // namespace pagoda::cli
