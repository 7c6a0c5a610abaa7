#include "server/metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "server/http_endpoint.h"

namespace pagoda {
namespace {

TEST(Histogram, BucketsAreCumulative) {
  Histogram h({0.1, 1.0});
  h.Observe(0.05);
  h.Observe(0.5);
  h.Observe(5.0);
  std::string out;
  h.Render("x", "", out);
  EXPECT_NE(out.find("x_bucket{le=\"0.1\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"1\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_count 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_sum 5.55\n"), std::string::npos) << out;
}

TEST(Metrics, RendersEngineStatsAndFinishedRequests) {
  Metrics m("demo");
  RequestTimes t;
  t.arrival = EngineClock::now();
  t.first_scheduled = t.arrival + std::chrono::milliseconds(2);
  t.first_token = t.arrival + std::chrono::milliseconds(30);
  t.token_times = {t.first_token, t.first_token + std::chrono::milliseconds(10)};
  t.finished = t.first_token + std::chrono::milliseconds(10);
  m.OnRequestFinished(t, FinishReason::kLength, Usage{});
  m.OnRequestFinished(t, FinishReason::kAbort, Usage{});
  EngineStats s;
  s.num_running = 3;
  s.kv_cache_usage = 0.25;
  s.num_blocks_in_use = 7;
  s.generation_tokens = 42;
  const std::string text = m.Render(s);
  EXPECT_NE(text.find("pagoda:num_kv_blocks_used{model_name=\"demo\"} 7\n"), std::string::npos);
  EXPECT_NE(text.find("pagoda:num_requests_running{model_name=\"demo\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("pagoda:kv_cache_usage_perc{model_name=\"demo\"} 0.25\n"), std::string::npos);
  EXPECT_NE(text.find("pagoda:generation_tokens_total{model_name=\"demo\"} 42\n"),
            std::string::npos);
  EXPECT_NE(text.find("finished_reason=\"length\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("finished_reason=\"abort\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("finished_reason=\"stop\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("pagoda:time_to_first_token_seconds_count{model_name=\"demo\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("pagoda:inter_token_latency_seconds_count{model_name=\"demo\"} 2\n"),
            std::string::npos);
  EXPECT_NE(
      text.find("pagoda:e2e_request_latency_seconds_bucket{model_name=\"demo\",le=\"+Inf\"} 2\n"),
      std::string::npos);
  EXPECT_EQ(text.find("vllm:"), std::string::npos);
  EXPECT_NE(text.find("# TYPE pagoda:e2e_request_latency_seconds histogram\n"), std::string::npos);
}

// A model name with a quote, a backslash and a line feed stays one label value: every sample
// line still belongs to its own series and none is forged.
TEST(Metrics, ModelNameIsEscapedInLabelValues) {
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  Metrics m("evil\"} 1\npagoda:forged{x=\"\\");
  m.OnRequestFinished(RequestTimes{}, FinishReason::kStop, Usage{});
  const std::string text = m.Render(EngineStats{});
  const std::string label = "{model_name=\"evil\\\"} 1\\npagoda:forged{x=\\\"\\\\\"}";
  EXPECT_NE(text.find("pagoda:num_requests_running" + label + " 0\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("\npagoda:forged"), std::string::npos) << text;
  const std::string success = "{model_name=\"evil\\\"} 1\\npagoda:forged{x=\\\"\\\\\",";
  EXPECT_NE(text.find("pagoda:request_success_total" + success + "finished_reason=\"stop\"} 1\n"),
            std::string::npos)
      << text;
}

// Every metric has one HELP and one TYPE line, its own help text, and every sample carries the
// model_name label; "both" renders each metric under both prefixes.
TEST(Metrics, BothNamesEveryMetricLabelledWithItsOwnHelp) {
  Metrics m("demo", "both");
  RequestTimes t;
  t.arrival = EngineClock::now();
  t.finished = t.arrival + std::chrono::milliseconds(5);
  m.OnRequestFinished(t, FinishReason::kStop, Usage{});
  const std::string text = m.Render(EngineStats{});
  std::map<std::string, int> helps;
  std::set<std::string> help_texts;
  size_t samples = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.starts_with("# HELP ")) {
      const std::string rest = line.substr(7);
      const std::string name = rest.substr(0, rest.find(' '));
      ++helps[name];
      if (name.starts_with("pagoda:")) help_texts.insert(rest.substr(rest.find(' ')));
      continue;
    }
    if (line.starts_with("#")) continue;
    ++samples;
    EXPECT_NE(line.find("{model_name=\"demo\""), std::string::npos) << line;
  }
  EXPECT_GT(samples, 40u);
  for (const std::string base : {"num_requests_running", "kv_cache_usage_perc",
                                 "time_to_first_token_seconds", "e2e_request_latency_seconds",
                                 "request_queue_time_seconds", "inter_token_latency_seconds"}) {
    EXPECT_EQ(helps["pagoda:" + base], 1) << base;
    EXPECT_EQ(helps["vllm:" + base], 1) << base;
  }
  EXPECT_EQ(helps["vllm:gpu_cache_usage_perc"], 1);
  EXPECT_EQ(helps.count("pagoda:gpu_cache_usage_perc"), 0u);
  // As many distinct help texts as metrics (gpu_cache_usage_perc is the vllm: set's extra).
  EXPECT_EQ(help_texts.size(), helps.size() / 2);
}

TEST(HttpEndpoint, SplitHostPortNamesTheField) {
  std::string host;
  int port = 0;
  EXPECT_TRUE(SplitHostPort("127.0.0.1:9090", "f", &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 9090);
  EXPECT_TRUE(SplitHostPort("[::1]:80", "f", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  for (const char* bad : {"nohost", ":80", "host:", "host:99999", "host:8x"}) {
    const Status st = SplitHostPort(bad, "server.metrics_address", &host, &port);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("server.metrics_address"), std::string::npos);
  }
}

}  // namespace
}  // namespace pagoda
