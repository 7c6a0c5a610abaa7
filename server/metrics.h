// Metrics: Prometheus text exposition of the engine's state and per-request latencies, with
// vLLM's metric names under the `pagoda:` prefix, under vLLM's own `vllm:` prefix
// (server.metrics_names: vllm), or under both (both: every metric twice). The `vllm:` set also
// carries vLLM's older name of the KV cache usage, vllm:gpu_cache_usage_perc, for tools that
// read it (the Gateway API inference extension's endpoint picker). Every sample, histogram
// buckets included, is labelled model_name="<served name>"; every metric has its own HELP.
// Thread-safe: the engine thread records finished requests, the HTTP threads render.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/engine.h"
#include "scheduler/request.h"

namespace pagoda {

// `value` escaped for a label value of the text exposition format: backslash, double quote and
// line feed become \\, \" and \n (so a model name cannot end the label or forge a series).
std::string EscapeLabelValue(std::string_view value);

// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void Observe(double v);
  // Appends the _bucket/_sum/_count lines of metric `name` to `out`; `labels` (e.g.
  // `model_name="x"`, may be empty) goes into every sample's label set.
  void Render(const std::string& name, const std::string& labels, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // last = +Inf overflow
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  // `names`: "pagoda", "vllm" (the prefix of every metric name) or "both" (each metric under
  // both prefixes).
  explicit Metrics(std::string model_name, std::string_view names = "pagoda");
  // Records one finished request (all samples done).
  void OnRequestFinished(const RequestTimes& times, FinishReason reason, const Usage& usage);
  // The whole exposition text, with gauges/counters read from `stats`.
  std::string Render(const EngineStats& stats) const;

 private:
  void RenderSet(const std::string& prefix, const EngineStats& stats, std::string& out) const;

  std::string model_name_;  // escaped (EscapeLabelValue)
  std::vector<std::string> prefixes_;  // "pagoda:" and/or "vllm:"
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> success_by_reason_;
  Histogram ttft_, itl_, e2e_, queue_;
};

}  // namespace pagoda
