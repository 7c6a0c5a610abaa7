// Tests for server/config: defaults, parsing of every section, error messages (file:line:col
// and key path), --set overrides, validation, dump round trip, configs/*.yaml.
#include "server/config.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace pagoda {
namespace {

const std::string kRoot = PAGODA_SOURCE_DIR;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

PagodaConfig ParseOk(const std::string& text) {
  Result<PagodaConfig> r = ParseConfig(text, "x.yaml");
  EXPECT_TRUE(r.ok()) << r.status().ToString() << "\n--- input:\n" << text;
  return r.ok() ? r.value() : PagodaConfig{};
}

// The error message of parsing `text` as "x.yaml" (fails the test if it parses).
std::string ParseError(const std::string& text) {
  Result<PagodaConfig> r = ParseConfig(text, "x.yaml");
  EXPECT_FALSE(r.ok()) << "parsed:\n" << text;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

// Leaf key paths ("server.tls.cert_file") of a YAML mapping.
void CollectLeaves(const YAML::Node& node, const std::string& prefix, std::set<std::string>& out) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string path = prefix + it->first.Scalar();
    if (it->second.IsMap()) {
      CollectLeaves(it->second, path + ".", out);
    } else {
      out.insert(path);
    }
  }
}

TEST(ConfigDefaults, MatchTheDocumentedValues) {
  const PagodaConfig c;
  EXPECT_EQ(c.server.listen_address, "127.0.0.1:50051");
  EXPECT_EQ(c.server.metrics_address, "127.0.0.1:9090");
  EXPECT_EQ(c.runtime.engine.max_waiting_requests, 1024);
  EXPECT_EQ(c.server.max_message_bytes, 16777216);
  EXPECT_EQ(c.server.max_tokens_limit, 0);
  EXPECT_EQ(c.server.shutdown_grace_seconds, 30);
  EXPECT_EQ(c.server.tls, TlsConfig{});
  EXPECT_EQ(c.server.auth, AuthConfig{});
  EXPECT_EQ(c.model.path, "");
  EXPECT_EQ(c.model.name, "");
  EXPECT_EQ(c.runtime.engine.scheduler.max_num_seqs, 64);
  EXPECT_EQ(c.runtime.engine.scheduler.max_num_batched_tokens, 2048);
  EXPECT_EQ(c.runtime.engine.scheduler.max_num_partial_prefills, 4);
  EXPECT_EQ(c.runtime.engine.scheduler.max_prefill_chunk, 0);
  EXPECT_EQ(c.runtime.engine.scheduler.step_time_budget_percent, 200);
  EXPECT_EQ(c.runtime.engine.scheduler.min_prefill_tokens, 16);
  EXPECT_EQ(c.runtime.engine.scheduler.policy, SchedulingPolicy::kFcfs);
  EXPECT_EQ(c.runtime.engine.max_model_len, 0);
  EXPECT_EQ(c.runtime.kv_cache.block_size, 16);
  EXPECT_EQ(c.runtime.kv_cache.dtype, std::nullopt);
  EXPECT_EQ(c.runtime.kv_cache.memory_bytes, 1073741824);
  EXPECT_EQ(c.runtime.kv_cache.num_blocks, 0);
  EXPECT_TRUE(c.runtime.engine.enable_prefix_caching);
  EXPECT_EQ(c.runtime.backend, BackendType::kCpu);
  EXPECT_EQ(c.runtime.cpu.threads, 0);
  EXPECT_EQ(c.logging.level, LogLevel::kInfo);
  EXPECT_EQ(c.logging.format, LogFormat::kText);
  EXPECT_TRUE(ValidateConfig(c).ok()) << ValidateConfig(c).ToString();
}

TEST(ConfigDefaults, EmptyOrCommentOnlyDocumentIsTheDefault) {
  EXPECT_EQ(ParseOk(""), PagodaConfig{});
  EXPECT_EQ(ParseOk("# nothing here\n"), PagodaConfig{});
  EXPECT_EQ(ParseOk("engine:\nserver:\n  tls:\n"), PagodaConfig{});
}

TEST(ConfigFiles, DefaultYamlIsTheDefaultConfig) {
  Result<PagodaConfig> r = LoadConfigFile(kRoot + "/configs/default.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), PagodaConfig{});
}

TEST(ConfigFiles, DefaultYamlDocumentsEveryDumpedKey) {
  std::set<std::string> dumped, documented;
  CollectLeaves(YAML::Load(DumpConfig(PagodaConfig{})), "", dumped);
  CollectLeaves(YAML::LoadFile(kRoot + "/configs/default.yaml"), "", documented);
  EXPECT_EQ(dumped.size(), 55u);  // 39 + the 10 neuron keys + the 6 speculative keys
  EXPECT_EQ(dumped, documented);
}

// Every leaf key line of default.yaml belongs to a group of key lines that a comment opens.
TEST(ConfigFiles, DefaultYamlCommentsEveryKey) {
  std::istringstream in(ReadFile(kRoot + "/configs/default.yaml"));
  std::string line;
  bool commented = false;
  int num_keys = 0;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(' ');
    if (start == std::string::npos) {
      commented = false;
    } else if (line[start] == '#') {
      commented = true;
    } else if (line.back() == ':') {  // a section header
      commented = false;
    } else {
      ++num_keys;
      EXPECT_TRUE(commented) << "no comment above: " << line;
    }
  }
  EXPECT_EQ(num_keys, 55);
}

TEST(ConfigFiles, DockerYamlListensOnAllInterfacesAndReadsModelsVolume) {
  Result<PagodaConfig> r = LoadConfigFile(kRoot + "/configs/docker.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  PagodaConfig expected;
  expected.server.listen_address = "0.0.0.0:50051";
  expected.server.metrics_address = "0.0.0.0:9090";
  expected.server.http_address = "0.0.0.0:8000";
  // allow_unauthenticated stays false: on 0.0.0.0 the image needs a token to start.
  expected.model.path = "/models/model.gguf";
  EXPECT_EQ(r.value(), expected);
}

TEST(ConfigFiles, MissingFileIsNotFoundAndNamed) {
  Result<PagodaConfig> r = LoadConfigFile("/nonexistent/pagoda.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/pagoda.yaml"), std::string::npos);
}

TEST(ConfigFiles, ErrorsNameTheLoadedFile) {
  const std::string path = testing::TempDir() + "/pagoda_config_test_bad.yaml";
  std::ofstream(path) << "engine:\n  max_num_seqs: 0\n";
  Result<PagodaConfig> r = LoadConfigFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            path + ":2:3: engine.max_num_seqs: expected an integer in 1..65536, got \"0\"");
  std::filesystem::remove(path);
}

TEST(ConfigParse, EverySection) {
  const PagodaConfig c = ParseOk(R"(
server:
  listen_address: "[::1]:6000"
  metrics_address: ""
  max_waiting_requests: 7
  max_message_bytes: 4096
  max_tokens_limit: 100
  shutdown_grace_seconds: 0
  tls: {cert_file: /c.pem, key_file: /k.pem}
  allow_unauthenticated: true
  metrics_names: both
  auth:
    bearer_token_file: /run/secrets/token
    protect_metrics: true
model:
  path: /models/m.gguf
  name: my-model
engine:
  max_num_seqs: 8
  max_num_batched_tokens: 512
  max_num_partial_prefills: 2
  max_prefill_chunk: 128
  step_time_budget_percent: 150
  min_prefill_tokens: 32
  policy: priority
  max_model_len: 1024
kv_cache:
  block_size: 32
  dtype: fp8_e4m3
  memory_bytes: 5000000000
  num_blocks: 99
  enable_prefix_caching: false
backend:
  type: cpu
  threads: 3
logging:
  level: debug
  format: json
)");
  EXPECT_EQ(c.server.listen_address, "[::1]:6000");
  EXPECT_EQ(c.server.metrics_address, "");
  EXPECT_EQ(c.runtime.engine.max_waiting_requests, 7);
  EXPECT_EQ(c.server.max_message_bytes, 4096);
  EXPECT_EQ(c.server.max_tokens_limit, 100);
  EXPECT_EQ(c.server.shutdown_grace_seconds, 0);
  EXPECT_EQ(c.server.tls.cert_file, "/c.pem");
  EXPECT_EQ(c.server.tls.key_file, "/k.pem");
  EXPECT_EQ(c.server.auth.bearer_token, "");
  EXPECT_EQ(c.server.auth.bearer_token_file, "/run/secrets/token");
  EXPECT_TRUE(c.server.auth.protect_metrics);
  EXPECT_TRUE(c.server.allow_unauthenticated);
  EXPECT_EQ(c.server.metrics_names, "both");
  EXPECT_EQ(c.model.path, "/models/m.gguf");
  EXPECT_EQ(c.model.name, "my-model");
  EXPECT_EQ(c.runtime.engine.scheduler.max_num_seqs, 8);
  EXPECT_EQ(c.runtime.engine.scheduler.max_num_batched_tokens, 512);
  EXPECT_EQ(c.runtime.engine.scheduler.max_num_partial_prefills, 2);
  EXPECT_EQ(c.runtime.engine.scheduler.max_prefill_chunk, 128);
  EXPECT_EQ(c.runtime.engine.scheduler.step_time_budget_percent, 150);
  EXPECT_EQ(c.runtime.engine.scheduler.min_prefill_tokens, 32);
  EXPECT_EQ(c.runtime.engine.scheduler.policy, SchedulingPolicy::kPriority);
  EXPECT_EQ(c.runtime.engine.max_model_len, 1024);
  EXPECT_EQ(c.runtime.kv_cache.block_size, 32);
  EXPECT_EQ(c.runtime.kv_cache.dtype, KvDtype::kFp8E4m3);
  EXPECT_EQ(c.runtime.kv_cache.memory_bytes, 5000000000);
  EXPECT_EQ(c.runtime.kv_cache.num_blocks, 99);
  EXPECT_FALSE(c.runtime.engine.enable_prefix_caching);
  EXPECT_EQ(c.runtime.backend, BackendType::kCpu);
  EXPECT_EQ(c.runtime.cpu.threads, 3);
  EXPECT_EQ(c.logging.level, LogLevel::kDebug);
  EXPECT_EQ(c.logging.format, LogFormat::kJson);
}

TEST(ConfigParse, AbsentKeysKeepTheirDefaults) {
  const PagodaConfig c = ParseOk("engine:\n  max_num_seqs: 8\n");
  PagodaConfig expected;
  expected.runtime.engine.scheduler.max_num_seqs = 8;
  EXPECT_EQ(c, expected);
}

TEST(ConfigParse, AcceptedSpellings) {
  EXPECT_EQ(ParseOk("engine: {max_num_seqs: \"8\"}").runtime.engine.scheduler.max_num_seqs, 8);
  EXPECT_EQ(ParseOk("engine: {max_num_seqs: +8}").runtime.engine.scheduler.max_num_seqs, 8);
  EXPECT_FALSE(
      ParseOk("kv_cache: {enable_prefix_caching: False}").runtime.engine.enable_prefix_caching);
  EXPECT_EQ(ParseOk("model: {path: }").model.path, "");
  EXPECT_EQ(ParseOk("model: {name: \"~\"}").model.name, "~");
  EXPECT_EQ(ParseOk("server: {listen_address: unix:/run/pagoda.sock}").server.listen_address,
            "unix:/run/pagoda.sock");
}

TEST(ConfigErrors, WrongTypeNamesFileLineColumnAndKeyPath) {
  EXPECT_EQ(ParseError("server:\n  max_tokens_limit: 3\nengine:\n  max_num_seqs: lots\n"),
            "x.yaml:4:3: engine.max_num_seqs: expected an integer in 1..65536, got \"lots\"");
  EXPECT_EQ(ParseError("kv_cache:\n  enable_prefix_caching: maybe\n"),
            "x.yaml:2:3: kv_cache.enable_prefix_caching: expected true or false, got \"maybe\"");
  EXPECT_EQ(ParseError("engine:\n  max_num_seqs: [1, 2]\n"),
            "x.yaml:2:3: engine.max_num_seqs: expected an integer in 1..65536, got a sequence");
  EXPECT_EQ(ParseError("model:\n  path: {a: 1}\n"),
            "x.yaml:2:3: model.path: expected a string, got a mapping");
  EXPECT_EQ(ParseError("engine:\n  max_num_seqs:\n"),
            "x.yaml:2:3: engine.max_num_seqs: expected an integer in 1..65536, got null");
  EXPECT_EQ(ParseError("engine:\n  max_num_seqs: 1.5\n"),
            "x.yaml:2:3: engine.max_num_seqs: expected an integer in 1..65536, got \"1.5\"");
}

TEST(ConfigErrors, OutOfRangeAndBadEnums) {
  EXPECT_EQ(ParseError("kv_cache:\n  block_size: 48\n"),
            "x.yaml:2:3: kv_cache.block_size: expected a power of two in 1..256, got \"48\"");
  EXPECT_EQ(ParseError("kv_cache:\n  block_size: 512\n"),
            "x.yaml:2:3: kv_cache.block_size: expected a power of two in 1..256, got \"512\"");
  EXPECT_EQ(ParseError("engine:\n  max_num_seqs: 3000000000\n"),
            "x.yaml:2:3: engine.max_num_seqs: expected an integer in 1..65536, got "
            "\"3000000000\"");
  // Knobs that size allocations have ranges a machine can hold, checked where they are written.
  EXPECT_EQ(ParseError("engine:\n  max_num_batched_tokens: 2147483647\n"),
            "x.yaml:2:3: engine.max_num_batched_tokens: expected an integer in 1..1048576, got "
            "\"2147483647\"");
  EXPECT_EQ(ParseError("kv_cache:\n  num_blocks: 2147483647\n"),
            "x.yaml:2:3: kv_cache.num_blocks: expected an integer in 0..16777216, got "
            "\"2147483647\"");
  EXPECT_EQ(ParseError("server:\n  shutdown_grace_seconds: -1\n"),
            "x.yaml:2:3: server.shutdown_grace_seconds: expected an integer in 0..3600, got "
            "\"-1\"");
  EXPECT_EQ(ParseError("engine:\n  policy: lifo\n"),
            "x.yaml:2:3: engine.policy: expected one of fcfs, priority, got \"lifo\"");
  EXPECT_EQ(ParseError("engine:\n  step_time_budget_percent: -1\n"),
            "x.yaml:2:3: engine.step_time_budget_percent: expected an integer in 0..100000, got "
            "\"-1\"");
  EXPECT_EQ(ParseError("engine:\n  min_prefill_tokens: 0\n"),
            "x.yaml:2:3: engine.min_prefill_tokens: expected an integer in 1..1048576, got "
            "\"0\"");
  EXPECT_EQ(ParseError("kv_cache: {dtype: int4}"),
            "x.yaml:1:12: kv_cache.dtype: expected one of auto, f32, bf16, f16, fp8_e4m3, got "
            "\"int4\"");
  EXPECT_EQ(ParseError("logging:\n  level: verbose\n"),
            "x.yaml:2:3: logging.level: expected one of trace, debug, info, warn, error, got "
            "\"verbose\"");
  EXPECT_EQ(ParseError("backend:\n  type: gpu\n"),
            "x.yaml:2:3: backend.type: expected one of cpu, neuron, got \"gpu\"");
  EXPECT_EQ(ParseError("backend:\n  batch_invariant: yes\n"),
            "x.yaml:2:3: backend.batch_invariant: expected one of auto, on, off, true, false, got "
            "\"yes\"");
  EXPECT_EQ(ParseError("server:\n  listen_address: localhost\n"),
            "x.yaml:2:3: server.listen_address: expected host:port, [ipv6]:port or unix:PATH, "
            "got \"localhost\"");
  EXPECT_EQ(ParseError("server:\n  metrics_address: \"::1:9090\"\n"),
            "x.yaml:2:3: server.metrics_address: expected \"\" (disabled) or host:port, "
            "[ipv6]:port or unix:PATH, got \"::1:9090\"");
}

TEST(ConfigErrors, UnknownKeysWithHints) {
  EXPECT_EQ(ParseError("engine:\n  max_num_seqs: 4\n  max_seqs: 8\n"),
            "x.yaml:3:3: unknown key 'engine.max_seqs' (did you mean 'max_num_seqs'?)");
  EXPECT_EQ(ParseError("engin:\n  max_num_seqs: 8\n"),
            "x.yaml:1:1: unknown key 'engin' (did you mean 'engine'?)");
  EXPECT_EQ(ParseError("server:\n  tls:\n    cert: a\n"),
            "x.yaml:3:5: unknown key 'server.tls.cert' (did you mean 'cert_file'?)");
  EXPECT_EQ(ParseError("gpu:\n  count: 8\n"), "x.yaml:1:1: unknown key 'gpu'");
  EXPECT_EQ(ParseError("engine.max_num_seqs: 8\n"),
            "x.yaml:1:1: unknown key 'engine.max_num_seqs' (dotted keys are not supported: "
            "nest it as a mapping)");
}

TEST(ConfigErrors, StructureErrors) {
  EXPECT_EQ(ParseError("- server\n- engine\n"),
            "x.yaml:1:1: expected a mapping of sections (server, model, engine, kv_cache, "
            "backend, logging) at the top level, got a sequence");
  EXPECT_EQ(ParseError("hello\n"),
            "x.yaml:1:1: expected a mapping of sections (server, model, engine, kv_cache, "
            "backend, logging) at the top level, got \"hello\"");
  EXPECT_EQ(ParseError("engine: 5\n"), "x.yaml:1:1: engine: expected a mapping, got \"5\"");
  EXPECT_EQ(ParseError("server:\n  tls: [a]\n"),
            "x.yaml:2:3: server.tls: expected a mapping, got a sequence");
  EXPECT_EQ(ParseError("engine:\n  max_num_seqs: 1\n  max_num_seqs: 2\n"),
            "x.yaml:3:3: duplicate key 'engine.max_num_seqs'");
  EXPECT_EQ(ParseError("engine: {}\n---\nengine: {}\n"),
            "x.yaml:3:1: expected one YAML document, got 2");
}

TEST(ConfigErrors, SyntaxErrorsHaveAPosition) {
  EXPECT_EQ(ParseError("engine:\n  max_num_seqs: [1, 2\n"),
            "x.yaml:3:1: YAML syntax error: end of sequence flow not found");
  EXPECT_EQ(ParseError("engine:\n  max_num_seqs: 1\n bad: 2\n"),
            "x.yaml:3:2: YAML syntax error: end of map not found");
}

TEST(ConfigErrors, ListenersThatAreOffDoNotCollide) {
  Result<PagodaConfig> c =
      ParseConfig("server:\n  metrics_address: ''\n  http_address: ''\n", "x.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->server.http_address.empty());
  EXPECT_TRUE(c->server.metrics_address.empty());
}

// yaml-cpp's LoadAll never returns on these (found by fuzz_config_yaml; the fuzzer's input is
// in tests/fuzz/regressions/config_yaml/).
TEST(ConfigErrors, StrayFlowIndicatorIsAnErrorNotAHang) {
  EXPECT_EQ(ParseError(","),
            "x.yaml:1:1: YAML syntax error: unexpected ',' outside a flow collection");
  EXPECT_EQ(ParseError("# comment\n,\n"),
            "x.yaml:2:1: YAML syntax error: unexpected ',' outside a flow collection");
  EXPECT_EQ(ParseError("a: 1\n---\n,\n"),
            "x.yaml:3:1: YAML syntax error: unexpected ',' outside a flow collection");
}

TEST(ConfigErrors, CrossKeyRulesPointAtTheKey) {
  EXPECT_EQ(ParseError("server:\n  tls:\n    cert_file: /c.pem\n"),
            "x.yaml:3:5: server.tls: cert_file is set but key_file is not (set both for TLS, "
            "or neither)");
  EXPECT_EQ(ParseError("server:\n  tls:\n    key_file: /k.pem\n"),
            "x.yaml:3:5: server.tls: key_file is set but cert_file is not (set both for TLS, "
            "or neither)");
  EXPECT_EQ(ParseError("server:\n  auth:\n    bearer_token: a\n    bearer_token_file: /b\n"),
            "x.yaml:4:5: server.auth: set at most one of bearer_token and bearer_token_file");
  EXPECT_EQ(ParseError("engine:\n  max_num_seqs: 64\n  max_num_batched_tokens: 32\n"),
            "x.yaml:3:3: engine.max_num_batched_tokens: must be >= engine.max_num_seqs (64) so "
            "every decode fits a step");
  EXPECT_EQ(ParseError("server:\n  metrics_address: 127.0.0.1:50051\n"),
            "x.yaml:2:3: server.metrics_address: must differ from server.listen_address "
            "(127.0.0.1:50051)");
  EXPECT_EQ(ParseError("engine:\n  max_num_seqs: 8\n  step_time_budget_percent: 50\n"),
            "x.yaml:3:3: engine.step_time_budget_percent: expected 0 (off) or >= 100 (a step "
            "with prefill takes at least its decodes' time), got 50");
  // A rule broken with a key left at its default names the file without a position.
  EXPECT_EQ(ParseError("engine:\n  max_num_seqs: 4096\n"),
            "x.yaml: engine.max_num_batched_tokens: must be >= engine.max_num_seqs (4096) so "
            "every decode fits a step");
}

TEST(ConfigErrors, NeverThrow) {
  const std::vector<std::string> inputs = {
      "{",
      "[",
      "\"",
      "engine: {",
      "&a [*a]",
      "*x",
      "? [a]\n: b",
      "!!binary x",
      "\t- a\n",
      "server: !!map",
      "engine: &e {}\nx: *e",
      ": :",
      "\xff\xfe",
      "%YAML 9.9\n",
      std::string(5000, '['),
      "[1]: 2",
      "null: 1",
      "~: ~",
  };
  for (const std::string& text : inputs) {
    EXPECT_NO_THROW({
      Result<PagodaConfig> r = ParseConfig(text, "x.yaml");
      if (!r.ok()) {
        EXPECT_EQ(r.status().message().rfind("x.yaml", 0), 0u) << text;
      }
    }) << text;
  }
}

TEST(ConfigOverride, SetsTopLevelAndNestedKeys) {
  PagodaConfig c;
  ASSERT_TRUE(ApplyOverride(c, "engine.max_num_seqs=8").ok());
  EXPECT_EQ(c.runtime.engine.scheduler.max_num_seqs, 8);
  ASSERT_TRUE(ApplyOverride(c, "server.tls.cert_file=x").ok());
  EXPECT_EQ(c.server.tls.cert_file, "x");
  // Cross-key rules are checked by ValidateConfig once every override is applied.
  EXPECT_EQ(ValidateConfig(c).message(),
            "server.tls: cert_file is set but key_file is not (set both for TLS, or neither)");
  ASSERT_TRUE(ApplyOverride(c, "server.tls.key_file=/k.pem").ok());
  EXPECT_TRUE(ValidateConfig(c).ok());
  ASSERT_TRUE(ApplyOverride(c, "kv_cache.enable_prefix_caching=false").ok());
  EXPECT_FALSE(c.runtime.engine.enable_prefix_caching);
  ASSERT_TRUE(ApplyOverride(c, "server.listen_address=0.0.0.0:1234").ok());
  EXPECT_EQ(c.server.listen_address, "0.0.0.0:1234");
  ASSERT_TRUE(ApplyOverride(c, "model.path=/m/a=b.gguf").ok());
  EXPECT_EQ(c.model.path, "/m/a=b.gguf");
  ASSERT_TRUE(ApplyOverride(c, "server.metrics_address=").ok());
  EXPECT_EQ(c.server.metrics_address, "");
  ASSERT_TRUE(ApplyOverride(c, "model.name=\"123\"").ok());
  EXPECT_EQ(c.model.name, "123");
  ASSERT_TRUE(ApplyOverride(c, "kv_cache.memory_bytes=8589934592").ok());
  EXPECT_EQ(c.runtime.kv_cache.memory_bytes, 8589934592);
}

TEST(ConfigOverride, BadKeysAndValuesLeaveTheConfigUnchanged) {
  PagodaConfig c;
  EXPECT_EQ(ApplyOverride(c, "engine.max_seqs=8").message(),
            "--set 'engine.max_seqs=8': unknown key 'engine.max_seqs' (did you mean "
            "'engine.max_num_seqs'?)");
  EXPECT_EQ(
      ApplyOverride(c, "engine.max_num_seqs=lots").message(),
      "--set 'engine.max_num_seqs=lots': engine.max_num_seqs: expected an integer in 1..65536, "
      "got \"lots\"");
  EXPECT_EQ(
      ApplyOverride(c, "engine.max_num_seqs=0").message(),
      "--set 'engine.max_num_seqs=0': engine.max_num_seqs: expected an integer in 1..65536, got "
      "\"0\"");
  EXPECT_EQ(ApplyOverride(c, "engine.policy=random").message(),
            "--set 'engine.policy=random': engine.policy: expected one of fcfs, priority, got "
            "\"random\"");
  EXPECT_EQ(ApplyOverride(c, "server.tls={a: 1}").message(),
            "--set 'server.tls={a: 1}': 'server.tls' is a section; set one of its keys, e.g. "
            "'server.tls.cert_file'");
  EXPECT_EQ(ApplyOverride(c, "model.path=[a, b]").message(),
            "--set 'model.path=[a, b]': model.path: expected a string, got a sequence");
  EXPECT_EQ(ApplyOverride(c, "engine.max_num_seqs").message(),
            "--set 'engine.max_num_seqs': expected key.path=value, e.g. engine.max_num_seqs=8");
  EXPECT_EQ(ApplyOverride(c, "=8").message(),
            "--set '=8': expected key.path=value, e.g. engine.max_num_seqs=8");
  EXPECT_EQ(ApplyOverride(c, "engine.max_num_batched_tokens=2147483647").message(),
            "--set 'engine.max_num_batched_tokens=2147483647': engine.max_num_batched_tokens: "
            "expected an integer in 1..1048576, got \"2147483647\"");
  const Status syntax = ApplyOverride(c, "engine.max_num_seqs=[1,");
  EXPECT_EQ(syntax.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(syntax.message().rfind("--set 'engine.max_num_seqs=[1,': engine.max_num_seqs: YAML "
                                   "syntax error in the value: ",
                                   0),
            0u)
      << syntax.message();
  EXPECT_EQ(c, PagodaConfig{});
}

TEST(ConfigValidate, ChecksValuesBuiltInCode) {
  PagodaConfig c;
  c.runtime.engine.scheduler.max_num_seqs = 0;
  EXPECT_EQ(ValidateConfig(c).message(),
            "engine.max_num_seqs: expected an integer in 1..65536, got 0");
  // kv_cache.dtype, engine.policy, backend.type and logging.* are enums past the parser: an
  // unknown name cannot be built in code (ConfigParse tests its parsing).
  c = PagodaConfig{};
  c.runtime.kv_cache.block_size = 3;
  EXPECT_EQ(ValidateConfig(c).message(),
            "kv_cache.block_size: expected a power of two in 1..256, got 3");
  c = PagodaConfig{};
  c.server.auth.bearer_token = "t";
  c.server.auth.bearer_token_file = "/t";
  EXPECT_EQ(ValidateConfig(c).message(),
            "server.auth: set at most one of bearer_token and bearer_token_file");
  c = PagodaConfig{};
  c.runtime.engine.max_model_len = 128;
  c.server.max_tokens_limit = 256;
  EXPECT_EQ(ValidateConfig(c).message(),
            "server.max_tokens_limit: must be <= engine.max_model_len (128)");
  c = PagodaConfig{};
  c.runtime.engine.scheduler.step_time_budget_percent = 99;
  EXPECT_EQ(ValidateConfig(c).message(),
            "engine.step_time_budget_percent: expected 0 (off) or >= 100 (a step with prefill "
            "takes at least its decodes' time), got 99");
  c = PagodaConfig{};
  c.runtime.engine.scheduler.min_prefill_tokens = 0;
  EXPECT_EQ(ValidateConfig(c).message(),
            "engine.min_prefill_tokens: expected an integer in 1..1048576, got 0");
}

TEST(ConfigDump, RedactSecretsHidesTheLiteralTokenOnly) {
  PagodaConfig c;
  EXPECT_EQ(RedactSecrets(c), c);  // nothing to hide
  c.server.auth.bearer_token = "s3cret-token";
  const std::string dumped = DumpConfig(RedactSecrets(c));
  EXPECT_EQ(dumped.find("s3cret"), std::string::npos) << dumped;
  EXPECT_NE(dumped.find(kRedacted), std::string::npos) << dumped;
  c.server.auth.bearer_token.clear();
  c.server.auth.bearer_token_file = "/run/secrets/token";
  EXPECT_EQ(RedactSecrets(c), c);
}

TEST(ConfigDump, RoundTripsTheDefault) {
  const std::string dumped = DumpConfig(PagodaConfig{});
  EXPECT_EQ(ParseOk(dumped), PagodaConfig{}) << dumped;
  EXPECT_NE(dumped.find("  listen_address: \"127.0.0.1:50051\"\n"), std::string::npos) << dumped;
  EXPECT_NE(dumped.find("    cert_file: \"\"\n"), std::string::npos) << dumped;
  EXPECT_NE(dumped.find("  policy: fcfs\n"), std::string::npos) << dumped;
  EXPECT_NE(dumped.find("  enable_prefix_caching: true\n"), std::string::npos) << dumped;
}

TEST(ConfigDump, RoundTripsAnEditedConfigWithAwkwardStrings) {
  PagodaConfig c;
  c.server.listen_address = "[::]:50051";
  c.server.metrics_address = "";
  c.server.tls = {"/etc/tls/a b.pem", "/etc/tls/k: \"x\".pem"};
  c.server.auth.bearer_token = "tok#en with 'quotes' and \\ and \t tab";
  c.model.path = "~";
  c.model.name = "true";
  c.runtime.engine.scheduler.max_num_seqs = 2;
  c.runtime.engine.scheduler.policy = SchedulingPolicy::kPriority;
  c.runtime.engine.max_model_len = 4096;
  c.runtime.kv_cache.dtype = KvDtype::kBf16;
  c.runtime.kv_cache.memory_bytes = 1ll << 40;
  c.runtime.engine.enable_prefix_caching = false;
  c.runtime.cpu.threads = 12;
  c.logging = {LogLevel::kError, LogFormat::kJson};
  ASSERT_TRUE(ValidateConfig(c).ok()) << ValidateConfig(c).ToString();
  for (const std::string& name : {std::string("123"), std::string("null"), std::string("- x"),
                                  std::string("caf\xc3\xa9"), std::string("")}) {
    c.model.name = name;
    const std::string dumped = DumpConfig(c);
    EXPECT_EQ(ParseOk(dumped), c) << dumped;
  }
}

TEST(ConfigRuntime, YamlKeysMapOntoTheLayersOptions) {
  const PagodaConfig c = ParseOk(R"(
server: {max_waiting_requests: 9}
engine: {max_num_seqs: 5, max_num_batched_tokens: 300, max_num_partial_prefills: 2,
         max_prefill_chunk: 64, policy: priority}
kv_cache: {block_size: 32, dtype: f16, memory_bytes: 12345678, num_blocks: 77,
           enable_prefix_caching: false}
)");
  const RuntimeConfig& o = c.runtime;
  EXPECT_EQ(o.kv_cache.block_size, 32);
  EXPECT_EQ(o.kv_cache.dtype, KvDtype::kF16);
  EXPECT_EQ(o.kv_cache.memory_bytes, 12345678);
  EXPECT_EQ(o.kv_cache.num_blocks, 77);
  EXPECT_FALSE(o.engine.enable_prefix_caching);
  EXPECT_EQ(o.engine.scheduler.max_num_seqs, 5);
  EXPECT_EQ(o.engine.scheduler.max_num_batched_tokens, 300);
  EXPECT_EQ(o.engine.scheduler.max_num_partial_prefills, 2);
  EXPECT_EQ(o.engine.scheduler.max_prefill_chunk, 64);
  EXPECT_EQ(o.engine.scheduler.policy, SchedulingPolicy::kPriority);
  EXPECT_EQ(o.engine.max_waiting_requests, 9);
  EXPECT_EQ(PagodaConfig{}.runtime.engine.scheduler.policy, SchedulingPolicy::kFcfs);
}

// backend.batch_invariant: auto by default; on / off (or true / false) force it.
TEST(ConfigRuntime, BatchInvariantTakesAutoOnOff) {
  EXPECT_EQ(PagodaConfig{}.runtime.cpu.batch_invariance, cpu::BatchInvariance::kAuto);
  EXPECT_EQ(ParseOk("backend:\n  batch_invariant: on\n").runtime.cpu.batch_invariance,
            cpu::BatchInvariance::kOn);
  EXPECT_EQ(ParseOk("backend:\n  batch_invariant: false\n").runtime.cpu.batch_invariance,
            cpu::BatchInvariance::kOff);
  const Result<PagodaConfig> neuron =
      ParseConfig("backend:\n  type: neuron\n  batch_invariant: on\n", "x.yaml");
  ASSERT_FALSE(neuron.ok());
  EXPECT_EQ(
      neuron.status().message().rfind("x.yaml:3:3: backend.batch_invariant: not used with", 0), 0u)
      << neuron.status().message();
}

// Keys the selected backend would ignore are errors, pointing at the key.
TEST(ConfigRuntime, KeysTheSelectedBackendIgnoresAreRejected) {
  const Result<PagodaConfig> kv =
      ParseConfig("backend: {type: neuron}\nkv_cache:\n  block_size: 32\n", "x.yaml");
  ASSERT_FALSE(kv.ok());
  EXPECT_EQ(kv.status().message().rfind(
                "x.yaml:3:3: kv_cache.block_size: not used with backend.type neuron", 0),
            0u)
      << kv.status().message();
  const Result<PagodaConfig> threads =
      ParseConfig("backend:\n  type: neuron\n  threads: 4\n", "x.yaml");
  ASSERT_FALSE(threads.ok());
  EXPECT_EQ(threads.status().message().rfind("x.yaml:3:3: backend.threads: not used with", 0), 0u)
      << threads.status().message();
  const Result<PagodaConfig> neuron = ParseConfig("neuron:\n  artifacts_dir: /a\n", "x.yaml");
  ASSERT_FALSE(neuron.ok());
  EXPECT_EQ(neuron.status().message().rfind(
                "x.yaml:1:1: neuron: the neuron.* keys are used only with backend.type neuron", 0),
            0u)
      << neuron.status().message();
  // At their defaults (as --print-config writes them) they are fine.
  PagodaConfig n;
  n.runtime.backend = BackendType::kNeuron;
  EXPECT_EQ(ParseOk(DumpConfig(n)), n);
}

// Sets (or unsets, for nullptr) an environment variable for the test's scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ConfigModelPath, DemoModelFollowsXdgCacheHome) {
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(DefaultDemoModelPath(), "/xdg/pagoda/demo-tiny.gguf");
    EXPECT_EQ(ResolvedModelPath(PagodaConfig{}), "/xdg/pagoda/demo-tiny.gguf");
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(DefaultDemoModelPath(), "/home/u/.cache/pagoda/demo-tiny.gguf");
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "relative/dir");  // ignored, as the XDG spec says
    ScopedEnv home("HOME", "/home/u");
    EXPECT_EQ(DefaultDemoModelPath(), "/home/u/.cache/pagoda/demo-tiny.gguf");
  }
  PagodaConfig c;
  c.model.path = "/m.gguf";
  EXPECT_EQ(ResolvedModelPath(c), "/m.gguf");
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

TEST(ConfigFiles, NeuronExampleSelectsTheNeuronBackend) {
  Result<PagodaConfig> r = LoadConfigFile(kRoot + "/configs/neuron.example.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->runtime.neuron.artifacts_dir.empty());
  EXPECT_EQ(r->runtime.neuron.buckets_enable,
            (std::vector<std::string>{"decode_b8_c2048", "prefill_t512"}));
  EXPECT_TRUE(ValidateConfig(*r).ok());
  EXPECT_EQ(r->runtime.backend, BackendType::kNeuron);
}

TEST(ConfigNeuron, EveryKey) {
  const PagodaConfig c = ParseOk(R"(
backend:
  type: neuron
neuron:
  runtime_library: /opt/x/libnrt.so.1
  artifacts_dir: /models/a
  manifest: m.json
  visible_cores: "0-1"
  logical_nc_config: 1
  vnc: -1
  exec_timeout_s: 5
  runtime_log_level: WARN
  warmup: false
  buckets:
    enable:
      - decode_b8_c2048
      - prefill_t512
)");
  NeuronOptions want;
  want.runtime_library = "/opt/x/libnrt.so.1";
  want.artifacts_dir = "/models/a";
  want.manifest = "m.json";
  want.visible_cores = "0-1";
  want.logical_nc_config = 1;
  want.vnc = -1;
  want.exec_timeout_s = 5;
  want.runtime_log_level = "WARN";
  want.warmup = false;
  want.buckets_enable = {"decode_b8_c2048", "prefill_t512"};
  EXPECT_EQ(c.runtime.neuron, want);
  EXPECT_TRUE(PagodaConfig{}.runtime.neuron.buckets_enable.empty());  // default: every program
}

TEST(ConfigNeuron, BucketsEnableForms) {
  EXPECT_EQ(ParseOk("backend: {type: neuron}\n"
                    "neuron: {buckets: {enable: [a, \"b c\", 7]}}")
                .runtime.neuron.buckets_enable,
            (std::vector<std::string>{"a", "b c", "7"}));
  EXPECT_TRUE(ParseOk("backend: {type: neuron}\n"
                      "neuron:\n  buckets:\n    enable: []\n")
                  .runtime.neuron.buckets_enable.empty());
  EXPECT_TRUE(ParseOk("backend: {type: neuron}\n"
                      "neuron:\n  buckets:\n    enable:\n")
                  .runtime.neuron.buckets_enable.empty());
  EXPECT_TRUE(ParseOk("backend: {type: neuron}\n"
                      "neuron:\n  buckets:\n")
                  .runtime.neuron.buckets_enable.empty());
}

TEST(ConfigNeuron, BucketsEnableErrorsNameFileLineAndKey) {
  // The comma-separated string of earlier versions is not accepted: the notes' form is a list.
  EXPECT_EQ(ParseError("neuron:\n  buckets:\n    enable: \"decode_b1,prefill_t16\"\n"),
            "x.yaml:3:5: neuron.buckets.enable: expected a list of program ids, e.g. "
            "[\"decode_b8\", \"prefill_t512\"], got \"decode_b1,prefill_t16\"");
  EXPECT_EQ(ParseError("neuron:\n  buckets:\n    enable: {a: 1}\n"),
            "x.yaml:3:5: neuron.buckets.enable: expected a list of program ids, e.g. "
            "[\"decode_b8\", \"prefill_t512\"], got a mapping");
  EXPECT_EQ(ParseError("neuron:\n  buckets:\n    enable:\n      - a\n      - [b]\n"),
            "x.yaml:5:9: neuron.buckets.enable[1]: expected a program id (a non-empty string), "
            "got a sequence");
  EXPECT_EQ(ParseError("neuron:\n  buckets:\n    enable: [a, \"\"]\n"),
            "x.yaml:3:17: neuron.buckets.enable[1]: expected a program id (a non-empty string), "
            "got \"\"");
  EXPECT_EQ(ParseError("neuron:\n  buckets:\n    enable: [a, b, a]\n"),
            "x.yaml:3:20: neuron.buckets.enable[2]: duplicate program id \"a\"");
  EXPECT_EQ(ParseError("neuron:\n  buckets:\n    enable: [~]\n"),
            "x.yaml:3:14: neuron.buckets.enable[0]: expected a program id (a non-empty string), "
            "got null");
  EXPECT_EQ(ParseError("neuron:\n  buckets_enable: \"a,b\"\n"),
            "x.yaml:2:3: unknown key 'neuron.buckets_enable' (did you mean 'buckets'?)");
  EXPECT_EQ(ParseError("neuron:\n  buckets:\n    enabled: [a]\n"),
            "x.yaml:3:5: unknown key 'neuron.buckets.enabled' (did you mean 'enable'?)");
  EXPECT_EQ(ParseError("neuron:\n  buckets: [a]\n"),
            "x.yaml:2:3: neuron.buckets: expected a mapping, got a sequence");
}

TEST(ConfigNeuron, BucketsEnableOverrideValidateAndDump) {
  PagodaConfig c;
  c.runtime.backend = BackendType::kNeuron;
  ASSERT_TRUE(ApplyOverride(c, "neuron.buckets.enable=[decode_b1, prefill_t16]").ok());
  EXPECT_EQ(c.runtime.neuron.buckets_enable,
            (std::vector<std::string>{"decode_b1", "prefill_t16"}));
  const std::string dumped = DumpConfig(c);
  EXPECT_NE(dumped.find("  buckets:\n    enable: [\"decode_b1\", \"prefill_t16\"]\n"),
            std::string::npos)
      << dumped;
  EXPECT_EQ(ParseOk(dumped), c);
  EXPECT_NE(DumpConfig(PagodaConfig{}).find("    enable: []\n"), std::string::npos);
  ASSERT_TRUE(ApplyOverride(c, "neuron.buckets.enable=").ok());
  EXPECT_TRUE(c.runtime.neuron.buckets_enable.empty());
  EXPECT_EQ(ApplyOverride(c, "neuron.buckets.enable=a,b").message(),
            "--set 'neuron.buckets.enable=a,b': neuron.buckets.enable: expected a list of "
            "program ids, e.g. [\"decode_b8\", \"prefill_t512\"], got \"a,b\"");
  EXPECT_EQ(ApplyOverride(c, "neuron.buckets.enable=[a, a]").message(),
            "--set 'neuron.buckets.enable=[a, a]': neuron.buckets.enable[1]: duplicate program "
            "id \"a\"");
  EXPECT_EQ(ApplyOverride(c, "neuron.buckets={enable: [a]}").message(),
            "--set 'neuron.buckets={enable: [a]}': 'neuron.buckets' is a section; set one of its "
            "keys, e.g. 'neuron.buckets.enable'");
  EXPECT_TRUE(c.runtime.neuron.buckets_enable.empty());
  c.runtime.neuron.buckets_enable = {"x", ""};
  EXPECT_EQ(ValidateConfig(c).message(),
            "neuron.buckets.enable[1]: expected a program id (a non-empty string), got \"\"");
  c.runtime.neuron.buckets_enable = {"x", "x"};
  EXPECT_EQ(ValidateConfig(c).message(), "neuron.buckets.enable[1]: duplicate program id \"x\"");
}

}  // namespace
}  // namespace pagoda
