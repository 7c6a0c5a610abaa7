// PagodaConfig: the server's YAML configuration (`pagoda serve --config FILE --set k=v`).
//
// Offers a plain-data PagodaConfig whose default-constructed value is the documented default
// (configs/default.yaml lists every key), and the functions around it:
//   LoadConfigFile / ParseConfig  YAML text -> validated config;
//   ApplyOverride                 one `--set section.key=value` (value parsed as YAML);
//   ValidateConfig                ranges, enums and cross-field rules (TLS both-or-neither, ...);
//   DumpConfig                    the effective config as YAML (`--print-config`), which
//                                 ParseConfig reads back to an equal config.
// PagodaConfig is composed of the option structs each layer owns: `runtime` (runtime/runtime.h:
// engine, scheduler, KV cache, CPU and Neuron backends), `server`, `model`, `logging`. YAML keys
// map onto their fields directly (the table in config.cc); each range and rule is the owning
// layer's, checked by its Validate... function.
// Every error is a Status (never an exception) naming the file, line:column (from yaml-cpp's
// Mark) and the full key path, e.g.
//   configs/x.yaml:12:3: engine.max_num_seqs: expected an integer >= 1, got "lots"
// Unknown keys are rejected with a "did you mean" hint. The module reads no other files
// (TLS / token files are opened by the server), so configs can be checked anywhere.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/field_check.h"
#include "common/status.h"
#include "runtime/runtime.h"

namespace pagoda {

struct TlsConfig {
  std::string cert_file;  // PEM; set both cert_file and key_file, or neither (plaintext)
  std::string key_file;
  bool operator==(const TlsConfig&) const = default;
};

struct AuthConfig {
  std::string bearer_token;       // literal token; at most one of the two is set
  std::string bearer_token_file;  // file holding the token (trailing whitespace trimmed)
  bool protect_metrics = false;   // /metrics (both listeners) needs the token too
  bool operator==(const AuthConfig&) const = default;
};

struct ServerConfig {
  std::string listen_address = "127.0.0.1:50051";  // gRPC; host:port, [v6]:port or unix:PATH
  std::string metrics_address = "127.0.0.1:9090";  // Prometheus HTTP; "" disables it
  // The HTTP API (OpenAI-compatible /v1/..., /tokenize, /detokenize, /health, /ready,
  // /metrics); "" disables it.
  std::string http_address = "127.0.0.1:8000";
  int32_t http_max_connections = 64;     // connections served at once; more get 503
  int32_t http_timeout_seconds = 60;     // read / write timeout of one HTTP connection
  std::string metrics_names = "pagoda";  // metric names: pagoda (pagoda:...) | vllm | both
  int32_t max_message_bytes = 16 * 1024 * 1024;
  int32_t max_tokens_limit = 0;  // largest max_tokens a request may ask; 0 = context length
  int32_t shutdown_grace_seconds = 30;
  // Serve an API (gRPC or HTTP) on a non-loopback address without a token; else start-up
  // refuses to.
  bool allow_unauthenticated = false;
  TlsConfig tls;
  AuthConfig auth;
  bool operator==(const ServerConfig&) const = default;
};
inline constexpr IntRange kMaxMessageBytesRange{1024, kInt32Max};
inline constexpr IntRange kMaxTokensLimitRange{0, kInt32Max};
inline constexpr IntRange kShutdownGraceSecondsRange{0, 3600};
inline constexpr IntRange kHttpMaxConnectionsRange{1, 4096};
inline constexpr IntRange kHttpTimeoutSecondsRange{1, 3600};
inline constexpr std::string_view kMetricsNamesChoices[] = {"pagoda", "vllm", "both"};

struct ModelConfigSection {
  std::string path;  // GGUF file or HF directory; "" = the demo model (DefaultDemoModelPath())
  std::string name;  // served model name; "" = from the file
  // The chat template of `messages` requests: "" = the model's own default; the name of one of
  // the model's named templates (e.g. tool_use); else a Jinja template file.
  std::string chat_template;
  bool operator==(const ModelConfigSection&) const = default;
};

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError };
inline constexpr std::pair<std::string_view, LogLevel> kLogLevelNames[] = {
    {"trace", LogLevel::kTrace},
    {"debug", LogLevel::kDebug},
    {"info", LogLevel::kInfo},
    {"warn", LogLevel::kWarn},
    {"error", LogLevel::kError}};
enum class LogFormat { kText, kJson };
inline constexpr std::pair<std::string_view, LogFormat> kLogFormatNames[] = {
    {"text", LogFormat::kText}, {"json", LogFormat::kJson}};

struct LoggingSection {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;  // text: human-readable; json: one object per line
  bool operator==(const LoggingSection&) const = default;
};

struct PagodaConfig {
  ServerConfig server;
  ModelConfigSection model;
  RuntimeConfig runtime;  // engine:, kv_cache:, backend:, neuron: and server.max_waiting_requests
  LoggingSection logging;
  bool operator==(const PagodaConfig&) const = default;
};

// Reads and parses `path` (errors name it; a missing file is NOT_FOUND).
Result<PagodaConfig> LoadConfigFile(const std::string& path);

// Parses one YAML document over the defaults (absent keys keep their default; an empty
// document is the default config) and validates the result. `filename` prefixes every error.
Result<PagodaConfig> ParseConfig(std::string_view yaml_text, const std::string& filename);

// Applies one `key.path=value` (e.g. "engine.max_num_seqs=8", "server.tls.cert_file=/x.pem").
// The value is parsed as YAML -- a scalar, or a flow list such as [a, b] for
// neuron.buckets.enable -- with the same per-key type and range checks as the file; cross-key
// rules are left to ValidateConfig, to be run after the last override.
Status ApplyOverride(PagodaConfig& config, std::string_view assignment);

// Checks every key's range / enum and the cross-key rules (tls both-or-neither, at most one
// auth token source, max_num_batched_tokens >= max_num_seqs, ...). Errors name the key path.
Status ValidateConfig(const PagodaConfig& config);

// The config as YAML: every key, in the order of configs/default.yaml.
std::string DumpConfig(const PagodaConfig& config);

// A copy for display (`--print-config`): a literal server.auth.bearer_token becomes
// kRedacted (the token file's path is kept: it is no secret).
inline constexpr std::string_view kRedacted = "<redacted>";
PagodaConfig RedactSecrets(PagodaConfig config);

// Where the demo model lives when model.path is empty:
// ${XDG_CACHE_HOME:-$HOME/.cache}/pagoda/demo-tiny.gguf (/tmp/pagoda/... without either).
std::string DefaultDemoModelPath();

// config.model.path, or DefaultDemoModelPath() when it is empty.
std::string ResolvedModelPath(const PagodaConfig& config);

}  // namespace pagoda
