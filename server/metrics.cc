#include "server/metrics.h"

#include <chrono>
#include <cstdio>

namespace pagoda {
namespace {

double Seconds(EngineClock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.12g", v);
  return buf;
}

const std::vector<double> kLatencyBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
                                            0.1,   0.25,  0.5,  0.75, 1.0,  2.5,  5.0,
                                            7.5,   10.0,  20.0, 40.0, 80.0};

void Header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::Render(const std::string& name, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + Num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + Num(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics(std::string model_name, std::string names)
    : model_name_(EscapeLabelValue(model_name)),
      prefix_(std::move(names) + ":"),
      ttft_(kLatencyBounds),
      itl_(kLatencyBounds),
      e2e_(kLatencyBounds),
      queue_(kLatencyBounds) {}

void Metrics::OnRequestFinished(const RequestTimes& t, FinishReason reason, const Usage&) {
  std::lock_guard<std::mutex> lock(mu_);
  ++success_by_reason_[FinishReasonName(reason)];
  const EngineClock::time_point none{};
  if (t.finished != none) e2e_.Observe(Seconds(t.finished - t.arrival));
  if (t.first_scheduled != none) queue_.Observe(Seconds(t.first_scheduled - t.arrival));
  if (t.first_token != none) ttft_.Observe(Seconds(t.first_token - t.arrival));
  for (size_t i = 1; i < t.token_times.size(); ++i) {
    itl_.Observe(Seconds(t.token_times[i] - t.token_times[i - 1]));
  }
}

std::string Metrics::Render(const EngineStats& s) const {
  const std::string label = "{model_name=\"" + model_name_ + "\"}";
  std::string out;
  auto gauge = [&](const char* name, double v, const char* help) {
    Header(out, prefix_ + name, "gauge", help);
    out += prefix_ + name + label + " " + Num(v) + "\n";
  };
  auto counter = [&](const char* name, double v, const char* help) {
    Header(out, prefix_ + name, "counter", help);
    out += prefix_ + name + label + " " + Num(v) + "\n";
  };
  gauge("num_requests_running", s.num_running, "Sequences in the running batch.");
  gauge("num_requests_waiting", s.num_waiting, "Sequences waiting to be scheduled.");
  gauge("kv_cache_usage_perc", s.kv_cache_usage, "Fraction of KV cache blocks in use (0..1).");
  if (prefix_ == "vllm:") {
    gauge("gpu_cache_usage_perc", s.kv_cache_usage, "Fraction of KV cache blocks in use (0..1).");
  }
  counter("prefix_cache_queries_total", s.prefix_cache_queries, "Prompt tokens looked up.");
  counter("prefix_cache_hits_total", s.prefix_cache_hits, "Prompt tokens found in the cache.");
  counter("num_preemptions_total", s.num_preemptions, "Sequences preempted.");
  counter("prompt_tokens_total", s.prompt_tokens, "Prompt tokens computed.");
  counter("generation_tokens_total", s.generation_tokens, "Tokens generated.");
  std::lock_guard<std::mutex> lock(mu_);
  Header(out, prefix_ + "request_success_total", "counter", "Finished requests by reason.");
  for (const char* reason : {"stop", "length", "abort", "error"}) {
    const auto it = success_by_reason_.find(reason);
    out += prefix_ + "request_success_total{model_name=\"" + model_name_ + "\",finished_reason=\"" +
           reason + "\"} " + std::to_string(it == success_by_reason_.end() ? 0 : it->second) + "\n";
  }
  const std::pair<const char*, const Histogram*> hists[] = {
      {"time_to_first_token_seconds", &ttft_},
      {"inter_token_latency_seconds", &itl_},
      {"e2e_request_latency_seconds", &e2e_},
      {"request_queue_time_seconds", &queue_}};
  for (const auto& [name, h] : hists) {
    Header(out, prefix_ + name, "histogram", "Request latency in seconds.");
    h->Render(prefix_ + name, out);
  }
  return out;
}

}  // namespace pagoda
