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

void Histogram::Render(const std::string& name, const std::string& labels, std::string& out) const {
  const std::string bucket = name + "_bucket{" + labels + (labels.empty() ? "" : ",") + "le=\"";
  const std::string set = labels.empty() ? "" : "{" + labels + "}";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += bucket + Num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += bucket + "+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum" + set + " " + Num(sum_) + "\n";
  out += name + "_count" + set + " " + std::to_string(count_) + "\n";
}

Metrics::Metrics(std::string model_name, std::string_view names)
    : model_name_(EscapeLabelValue(model_name)),
      prefixes_(names == "both" ? std::vector<std::string>{"pagoda:", "vllm:"}
                                : std::vector<std::string>{std::string(names) + ":"}),
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
  std::string out;
  for (const std::string& prefix : prefixes_) RenderSet(prefix, s, out);
  return out;
}

// One set of metrics, every name under `prefix`.
void Metrics::RenderSet(const std::string& prefix, const EngineStats& s, std::string& out) const {
  const std::string model_label = "model_name=\"" + model_name_ + "\"";
  auto sample = [&](const char* name, const char* type, double v, const char* help) {
    Header(out, prefix + name, type, help);
    out += prefix + name + "{" + model_label + "} " + Num(v) + "\n";
  };
  sample("num_requests_running", "gauge", s.num_running, "Sequences in the running batch.");
  sample("num_requests_waiting", "gauge", s.num_waiting, "Sequences waiting to be scheduled.");
  sample("kv_cache_usage_perc", "gauge", s.kv_cache_usage,
         "Fraction of KV cache blocks in use (0..1).");
  sample("num_kv_blocks_used", "gauge", s.num_blocks_in_use,
         "KV cache blocks referenced by a sequence (0 when idle; cached free blocks excluded).");
  if (prefix == "vllm:") {
    sample("gpu_cache_usage_perc", "gauge", s.kv_cache_usage,
           "Fraction of KV cache blocks in use (0..1); vLLM's older name of kv_cache_usage_perc.");
  }
  sample("prefix_cache_queries_total", "counter", s.prefix_cache_queries,
         "Prompt tokens looked up.");
  sample("prefix_cache_hits_total", "counter", s.prefix_cache_hits,
         "Prompt tokens found in the cache.");
  sample("num_preemptions_total", "counter", s.num_preemptions, "Sequences preempted.");
  sample("prompt_tokens_total", "counter", s.prompt_tokens, "Prompt tokens computed.");
  sample("generation_tokens_total", "counter", s.generation_tokens, "Tokens generated.");
  const SpeculativeStats& spec = s.speculative;
  sample("spec_decode_num_drafts_total", "counter", spec.num_drafts,
         "Speculative verifications (a sequence's proposals checked in one step).");
  sample("spec_decode_num_draft_tokens_total", "counter", spec.num_draft_tokens,
         "Speculative tokens proposed and verified.");
  sample("spec_decode_num_accepted_tokens_total", "counter", spec.num_accepted_tokens,
         "Speculative tokens accepted.");
  Header(out, prefix + "spec_decode_num_accepted_tokens_per_pos_total", "counter",
         "Speculative tokens accepted, by position in the proposal (0 = first).");
  for (size_t i = 0; i < spec.accepted_per_position.size(); ++i) {
    out += prefix + "spec_decode_num_accepted_tokens_per_pos_total{" + model_label +
           ",position=\"" + std::to_string(i) + "\"} " +
           Num(static_cast<double>(spec.accepted_per_position[i])) + "\n";
  }
  std::lock_guard<std::mutex> lock(mu_);
  Header(out, prefix + "request_success_total", "counter", "Finished requests by reason.");
  for (const char* reason : {"stop", "length", "abort", "error"}) {
    const auto it = success_by_reason_.find(reason);
    out += prefix + "request_success_total{" + model_label + ",finished_reason=\"" + reason +
           "\"} " + std::to_string(it == success_by_reason_.end() ? 0 : it->second) + "\n";
  }
  const struct {
    const char* name;
    const Histogram* histogram;
    const char* help;
  } hists[] = {
      {"time_to_first_token_seconds", &ttft_,
       "Seconds from a request's arrival to its first generated token."},
      {"inter_token_latency_seconds", &itl_,
       "Seconds between two consecutive generated tokens of a sequence."},
      {"e2e_request_latency_seconds", &e2e_,
       "Seconds from a request's arrival to its last output."},
      {"request_queue_time_seconds", &queue_,
       "Seconds a request waited before its first scheduling."},
  };
  for (const auto& h : hists) {
    Header(out, prefix + h.name, "histogram", h.help);
    h.histogram->Render(prefix + h.name, model_label, out);
  }
}

}  // namespace pagoda
