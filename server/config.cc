#include "server/config.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>
#include <variant>
#include <vector>

namespace pagoda {
namespace {

// How a key's value is checked and printed.
enum class Kind {
  kInt,      // decimal integer in `range` (a range owned by the key's layer)
  kBool,     // true / false
  kString,   // any string
  kChoice,   // a string, one of `choices`
  kEnum,     // an enum of the owning layer, by its name table
  kAddress,  // host:port, [v6]:port or unix:PATH (optionally "" = disabled)
  kIdList,   // a YAML sequence of distinct non-empty strings (null = empty)
};

using FieldPtr = std::variant<int32_t*, int64_t*, bool*, std::string*, std::vector<std::string>*,
                              SchedulingPolicy*, BackendType*, std::optional<KvDtype>*, LogLevel*,
                              LogFormat*, SpeculativeMethod*, cpu::BatchInvariance*>;
using Getter = FieldPtr (*)(PagodaConfig&);

// The name tables of the enum fields (owned by the enums' layers). kv_cache.dtype also takes
// "auto" (nullopt).
EnumNames<SchedulingPolicy> NamesOf(SchedulingPolicy*) { return kSchedulingPolicyNames; }
EnumNames<BackendType> NamesOf(BackendType*) { return kBackendTypeNames; }
EnumNames<KvDtype> NamesOf(std::optional<KvDtype>*) { return kKvDtypeNames; }
EnumNames<LogLevel> NamesOf(LogLevel*) { return kLogLevelNames; }
EnumNames<LogFormat> NamesOf(LogFormat*) { return kLogFormatNames; }
EnumNames<SpeculativeMethod> NamesOf(SpeculativeMethod*) { return kSpeculativeMethodNames; }
EnumNames<cpu::BatchInvariance> NamesOf(cpu::BatchInvariance*) {
  return cpu::kBatchInvarianceNames;
}

template <typename T>
constexpr bool kIsEnumField = std::is_enum_v<T> || std::is_same_v<T, std::optional<KvDtype>>;

// The names an enum field accepts, in table order ("auto" first for kv_cache.dtype).
std::vector<std::string_view> EnumChoices(const FieldPtr& p) {
  return std::visit(
      [](auto* ptr) {
        std::vector<std::string_view> out;
        using T = std::remove_pointer_t<decltype(ptr)>;
        if constexpr (kIsEnumField<T>) {
          if constexpr (std::is_same_v<T, std::optional<KvDtype>>) out.push_back("auto");
          for (const auto& [name, value] : NamesOf(ptr)) out.push_back(name);
        }
        return out;
      },
      p);
}

// Sets an enum field from its name; false if the name is not one of EnumChoices.
bool SetEnum(const FieldPtr& p, std::string_view text) {
  return std::visit(
      [text](auto* ptr) {
        using T = std::remove_pointer_t<decltype(ptr)>;
        if constexpr (kIsEnumField<T>) {
          if constexpr (std::is_same_v<T, std::optional<KvDtype>>) {
            if (text == "auto") {
              ptr->reset();
              return true;
            }
          }
          const auto v = ParseEnum(NamesOf(ptr), text);
          if (v) *ptr = *v;
          return v.has_value();
        }
        return false;
      },
      p);
}

// The name of an enum field's value.
std::string EnumText(const FieldPtr& p) {
  return std::visit(
      [](auto* ptr) -> std::string {
        using T = std::remove_pointer_t<decltype(ptr)>;
        if constexpr (std::is_same_v<T, std::optional<KvDtype>>) {
          return ptr->has_value() ? std::string(EnumName(NamesOf(ptr), **ptr)) : "auto";
        } else if constexpr (kIsEnumField<T>) {
          return std::string(EnumName(NamesOf(ptr), *ptr));
        }
        return "";
      },
      p);
}

// One leaf key of the configuration: its full dotted path and where it lives in PagodaConfig.
struct Field {
  std::string_view path;
  Kind kind;
  Getter get;
  IntRange range;                             // kInt
  std::span<const std::string_view> choices;  // kChoice
  bool allow_empty = false;                   // kAddress
};

#define PAGODA_CFG(member) [](PagodaConfig& c) -> FieldPtr { return &c.member; }

Field Int(std::string_view path, const IntRange& range, Getter get) {
  return {path, Kind::kInt, get, range, {}, false};
}
Field Bool(std::string_view path, Getter get) { return {path, Kind::kBool, get, {}, {}, false}; }
Field Str(std::string_view path, Getter get) { return {path, Kind::kString, get, {}, {}, false}; }
Field Choice(std::string_view path, std::span<const std::string_view> choices, Getter get) {
  return {path, Kind::kChoice, get, {}, choices, false};
}
Field Enum(std::string_view path, Getter get) { return {path, Kind::kEnum, get, {}, {}, false}; }
Field Address(std::string_view path, bool allow_empty, Getter get) {
  return {path, Kind::kAddress, get, {}, {}, allow_empty};
}
Field IdList(std::string_view path, Getter get) {
  return {path, Kind::kIdList, get, {}, {}, false};
}

// Every key, in the order of configs/default.yaml and DumpConfig.
const std::vector<Field>& Fields() {
  static const std::vector<Field> kFields = {
      Address("server.listen_address", false, PAGODA_CFG(server.listen_address)),
      Address("server.metrics_address", true, PAGODA_CFG(server.metrics_address)),
      Address("server.http_address", true, PAGODA_CFG(server.http_address)),
      Int("server.http_max_connections", kHttpMaxConnectionsRange,
          PAGODA_CFG(server.http_max_connections)),
      Int("server.http_timeout_seconds", kHttpTimeoutSecondsRange,
          PAGODA_CFG(server.http_timeout_seconds)),
      Choice("server.metrics_names", kMetricsNamesChoices, PAGODA_CFG(server.metrics_names)),
      Int("server.max_waiting_requests", kMaxWaitingRequestsRange,
          PAGODA_CFG(runtime.engine.max_waiting_requests)),
      Int("server.max_message_bytes", kMaxMessageBytesRange, PAGODA_CFG(server.max_message_bytes)),
      Int("server.max_tokens_limit", kMaxTokensLimitRange, PAGODA_CFG(server.max_tokens_limit)),
      Int("server.shutdown_grace_seconds", kShutdownGraceSecondsRange,
          PAGODA_CFG(server.shutdown_grace_seconds)),
      Bool("server.allow_unauthenticated", PAGODA_CFG(server.allow_unauthenticated)),
      Str("server.tls.cert_file", PAGODA_CFG(server.tls.cert_file)),
      Str("server.tls.key_file", PAGODA_CFG(server.tls.key_file)),
      Str("server.auth.bearer_token", PAGODA_CFG(server.auth.bearer_token)),
      Str("server.auth.bearer_token_file", PAGODA_CFG(server.auth.bearer_token_file)),
      Bool("server.auth.protect_metrics", PAGODA_CFG(server.auth.protect_metrics)),
      Str("model.path", PAGODA_CFG(model.path)),
      Str("model.name", PAGODA_CFG(model.name)),
      Str("model.chat_template", PAGODA_CFG(model.chat_template)),
      Int("engine.max_num_seqs", kMaxNumSeqsRange,
          PAGODA_CFG(runtime.engine.scheduler.max_num_seqs)),
      Int("engine.max_num_batched_tokens", kMaxNumBatchedTokensRange,
          PAGODA_CFG(runtime.engine.scheduler.max_num_batched_tokens)),
      Int("engine.max_num_partial_prefills", kMaxNumPartialPrefillsRange,
          PAGODA_CFG(runtime.engine.scheduler.max_num_partial_prefills)),
      Int("engine.max_prefill_chunk", kMaxPrefillChunkRange,
          PAGODA_CFG(runtime.engine.scheduler.max_prefill_chunk)),
      Int("engine.step_time_budget_percent", kStepTimeBudgetPercentRange,
          PAGODA_CFG(runtime.engine.scheduler.step_time_budget_percent)),
      Int("engine.min_prefill_tokens", kMinPrefillTokensRange,
          PAGODA_CFG(runtime.engine.scheduler.min_prefill_tokens)),
      Enum("engine.policy", PAGODA_CFG(runtime.engine.scheduler.policy)),
      Int("engine.max_model_len", kMaxModelLenRange, PAGODA_CFG(runtime.engine.max_model_len)),
      Int("kv_cache.block_size", kKvBlockSizeRange, PAGODA_CFG(runtime.kv_cache.block_size)),
      Enum("kv_cache.dtype", PAGODA_CFG(runtime.kv_cache.dtype)),
      Int("kv_cache.memory_bytes", kKvMemoryBytesRange, PAGODA_CFG(runtime.kv_cache.memory_bytes)),
      Int("kv_cache.num_blocks", kKvNumBlocksRange, PAGODA_CFG(runtime.kv_cache.num_blocks)),
      Bool("kv_cache.enable_prefix_caching", PAGODA_CFG(runtime.engine.enable_prefix_caching)),
      Enum("speculative.method", PAGODA_CFG(runtime.engine.speculative.method)),
      Int("speculative.num_tokens", kSpeculativeNumTokensRange,
          PAGODA_CFG(runtime.engine.speculative.num_tokens)),
      Int("speculative.ngram_min", kNgramRange, PAGODA_CFG(runtime.engine.speculative.ngram_min)),
      Int("speculative.ngram_max", kNgramRange, PAGODA_CFG(runtime.engine.speculative.ngram_max)),
      Int("speculative.disable_by_batch_size", kDisableByBatchSizeRange,
          PAGODA_CFG(runtime.engine.speculative.disable_by_batch_size)),
      Str("speculative.draft_model", PAGODA_CFG(runtime.engine.speculative.draft_model)),
      Enum("backend.type", PAGODA_CFG(runtime.backend)),
      Int("backend.threads", cpu::kCpuThreadsRange, PAGODA_CFG(runtime.cpu.threads)),
      Int("backend.spin_us", cpu::kCpuSpinUsRange, PAGODA_CFG(runtime.cpu.spin_us)),
      Bool("backend.pack_weights", PAGODA_CFG(runtime.cpu.pack_weights)),
      Enum("backend.batch_invariant", PAGODA_CFG(runtime.cpu.batch_invariance)),
      Str("neuron.runtime_library", PAGODA_CFG(runtime.neuron.runtime_library)),
      Str("neuron.artifacts_dir", PAGODA_CFG(runtime.neuron.artifacts_dir)),
      Str("neuron.manifest", PAGODA_CFG(runtime.neuron.manifest)),
      Str("neuron.visible_cores", PAGODA_CFG(runtime.neuron.visible_cores)),
      Int("neuron.logical_nc_config", kNeuronLogicalNcConfigRange,
          PAGODA_CFG(runtime.neuron.logical_nc_config)),
      Int("neuron.vnc", kNeuronVncRange, PAGODA_CFG(runtime.neuron.vnc)),
      Int("neuron.exec_timeout_s", kNeuronExecTimeoutRange,
          PAGODA_CFG(runtime.neuron.exec_timeout_s)),
      Choice("neuron.runtime_log_level", kNeuronRuntimeLogLevels,
             PAGODA_CFG(runtime.neuron.runtime_log_level)),
      Bool("neuron.warmup", PAGODA_CFG(runtime.neuron.warmup)),
      IdList("neuron.buckets.enable", PAGODA_CFG(runtime.neuron.buckets_enable)),
      Enum("logging.level", PAGODA_CFG(logging.level)),
      Enum("logging.format", PAGODA_CFG(logging.format)),
  };
  return kFields;
}

#undef PAGODA_CFG

// Reads a field of a const config (the getter only forms a pointer; nothing is written).
FieldPtr GetConst(const Field& f, const PagodaConfig& c) {
  return f.get(const_cast<PagodaConfig&>(c));
}

const Field* FindField(std::string_view path) {
  for (const Field& f : Fields()) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

// True if `path` names a section (a mapping of keys), e.g. "server" or "server.tls".
bool IsSection(std::string_view path) {
  for (const Field& f : Fields()) {
    if (f.path.size() > path.size() && f.path.starts_with(path) && f.path[path.size()] == '.') {
      return true;
    }
  }
  return false;
}

// The keys directly under a section ("" = the top level), in table order.
std::vector<std::string> ChildKeys(std::string_view section) {
  std::vector<std::string> keys;
  for (const Field& f : Fields()) {
    std::string_view rest = f.path;
    if (!section.empty()) {
      if (!IsSection(section) || !rest.starts_with(section) || rest.size() <= section.size() ||
          rest[section.size()] != '.') {
        continue;
      }
      rest.remove_prefix(section.size() + 1);
    }
    std::string key(rest.substr(0, rest.find('.')));
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  return keys;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean 'x'?)" for the closest candidate (by edit distance, or one name a prefix of
// the other), or "" when none is close.
std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  size_t best_distance = 0;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(name, c);
    const bool prefix = std::min(name.size(), c.size()) >= 3 &&
                        (c.starts_with(name) || name.starts_with(std::string_view(c)));
    const bool close = d <= std::max<size_t>(2, c.size() / 3) || prefix;
    if (close && (best == nullptr || d < best_distance)) {
      best = &c;
      best_distance = d;
    }
  }
  return best == nullptr ? "" : " (did you mean '" + *best + "'?)";
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

// What the user wrote, for "got ..." in messages.
std::string Describe(const YAML::Node& node) {
  if (node.IsNull()) return "null";
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a sequence";
  return Quote(node.Scalar());
}

std::string Expectation(const Field& f, const FieldPtr& p) {
  switch (f.kind) {
    case Kind::kInt:
      return DescribeRange(f.range);
    case Kind::kBool:
      return "true or false";
    case Kind::kString:
      return "a string";
    case Kind::kChoice:
      return DescribeChoices(f.choices);
    case Kind::kEnum:
      return DescribeChoices(EnumChoices(p));
    case Kind::kAddress:
      return std::string(f.allow_empty ? "\"\" (disabled) or " : "") +
             "host:port, [ipv6]:port or unix:PATH";
    case Kind::kIdList:
      return "a list of program ids, e.g. [\"decode_b8\", \"prefill_t512\"]";
  }
  return "a value";
}

std::string Expected(const Field& f, const FieldPtr& p, const std::string& got) {
  return std::string(f.path) + ": expected " + Expectation(f, p) + ", got " + got;
}

// host:port with a non-empty host (IPv6 hosts bracketed) and a port in 0..65535, or unix:PATH.
bool ValidAddress(std::string_view s) {
  if (s.starts_with("unix:")) return s.size() > 5;
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == s.size()) return false;
  const std::string_view host = s.substr(0, colon);
  const std::string_view port = s.substr(colon + 1);
  if (host.find(':') != std::string_view::npos &&
      (host.front() != '[' || host.back() != ']' || host.size() < 3)) {
    return false;
  }
  int value = -1;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  return ec == std::errc() && end == port.data() + port.size() && value >= 0 && value <= 65535;
}

bool StringValid(const Field& f, std::string_view s) {
  switch (f.kind) {
    case Kind::kChoice:
      return std::find(f.choices.begin(), f.choices.end(), s) != f.choices.end();
    case Kind::kAddress:
      return (f.allow_empty && s.empty()) || ValidAddress(s);
    default:
      return true;
  }
}

// "path[i]", the key of item `i` of a kIdList field.
std::string ItemKey(const Field& f, size_t i) {
  return std::string(f.path) + "[" + std::to_string(i) + "]";
}

// "path[i]: expected a program id (a non-empty string), got GOT".
std::string ExpectedProgramId(const Field& f, size_t i, const std::string& got) {
  return ItemKey(f, i) + ": expected a program id (a non-empty string), got " + got;
}

// The error of an int / string field's current value ("path: expected ..., got ..."), if any.
// Lists and cross-key rules are the owning layers' (ValidateRuntimeConfig).
std::optional<std::string> CheckField(const Field& f, const PagodaConfig& c) {
  const FieldPtr p = GetConst(f, c);
  if (auto* i32 = std::get_if<int32_t*>(&p)) {
    if (!f.range.Contains(**i32)) return Expected(f, p, std::to_string(**i32));
  } else if (auto* i64 = std::get_if<int64_t*>(&p)) {
    if (!f.range.Contains(**i64)) return Expected(f, p, std::to_string(**i64));
  } else if (auto* str = std::get_if<std::string*>(&p)) {
    if (!StringValid(f, **str)) return Expected(f, p, Quote(**str));
  }
  return std::nullopt;
}

std::optional<int64_t> ParseInt(const std::string& text) {
  int64_t v = 0;
  const char* begin = text.data() + (text.starts_with('+') ? 1 : 0);
  const auto [end, ec] = std::from_chars(begin, text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

std::optional<bool> ParseBool(const std::string& text) {
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  return std::nullopt;
}

// Sets a kIdList field from a YAML sequence of scalars (null = empty). On error the config is
// unchanged, the message is returned and `*mark` (if `mark` is not null) is moved to the
// offending item.
std::optional<std::string> SetListFromNode(const Field& f, PagodaConfig& c, const YAML::Node& node,
                                           YAML::Mark* mark) {
  std::vector<std::string> list;
  if (!node.IsNull() && !node.IsSequence()) return Expected(f, f.get(c), Describe(node));
  for (size_t i = 0; node.IsSequence() && i < node.size(); ++i) {
    const YAML::Node item = node[i];
    std::optional<std::string> error;
    if (!item.IsScalar()) {
      error = ExpectedProgramId(f, i, Describe(item));
    } else {
      list.push_back(item.Scalar());
      std::string e = ProgramIdError(list, i, ItemKey(f, i));
      if (!e.empty()) error = std::move(e);
    }
    if (error) {
      if (mark != nullptr) *mark = item.Mark();
      return error;
    }
  }
  *std::get<std::vector<std::string>*>(f.get(c)) = std::move(list);
  return std::nullopt;
}

// Sets a field from a YAML scalar (null counts as "" for strings) or, for kIdList, a sequence.
// On error the config is unchanged and the message ("path: expected ..., got ...") is returned;
// `mark` (may be null) is moved to the offending list item, if it is one.
std::optional<std::string> SetFromNode(const Field& f, PagodaConfig& c, const YAML::Node& node,
                                       YAML::Mark* mark = nullptr) {
  if (f.kind == Kind::kIdList) return SetListFromNode(f, c, node, mark);
  const FieldPtr p = f.get(c);
  if (!node.IsScalar() && !node.IsNull()) return Expected(f, p, Describe(node));
  const std::string text = node.IsNull() ? "" : node.Scalar();
  if (std::holds_alternative<int32_t*>(p) || std::holds_alternative<int64_t*>(p)) {
    const std::optional<int64_t> v = node.IsNull() ? std::nullopt : ParseInt(text);
    if (!v || !f.range.Contains(*v)) return Expected(f, p, Describe(node));
    if (auto* i32 = std::get_if<int32_t*>(&p)) **i32 = static_cast<int32_t>(*v);
    if (auto* i64 = std::get_if<int64_t*>(&p)) **i64 = *v;
  } else if (auto* b = std::get_if<bool*>(&p)) {
    const std::optional<bool> v = node.IsNull() ? std::nullopt : ParseBool(text);
    if (!v) return Expected(f, p, Describe(node));
    **b = *v;
  } else if (auto* str = std::get_if<std::string*>(&p)) {
    if ((f.kind == Kind::kChoice && node.IsNull()) || !StringValid(f, text)) {
      return Expected(f, p, Describe(node));
    }
    **str = text;
  } else if (node.IsNull() || !SetEnum(p, text)) {
    return Expected(f, p, Describe(node));
  }
  return std::nullopt;
}

// "file:line:col: " (yaml-cpp marks are 0-based), "file: " without a mark, "" without a file.
std::string Where(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return file.empty() ? "" : file + ": ";
  return (file.empty() ? "<config>" : file) + ":" + std::to_string(mark.line + 1) + ":" +
         std::to_string(mark.column + 1) + ": ";
}

// Where each key was found in the file, so validation errors can point at it.
using MarkMap = std::map<std::string, YAML::Mark, std::less<>>;

struct ParseState {
  const std::string& file;
  PagodaConfig config;
  MarkMap marks;
};

Status WalkMapping(const YAML::Node& map, const std::string& section, ParseState& st);

// One `key: value` pair of the mapping at `section`.
Status WalkEntry(const YAML::Node& key, const YAML::Node& value, const std::string& section,
                 ParseState& st) {
  const std::string where = Where(st.file, key.Mark());
  if (!key.IsScalar()) return InvalidArgument(where + "expected a key name, got " + Describe(key));
  const std::string& name = key.Scalar();
  const std::string path = section.empty() ? name : section + "." + name;
  if (const Field* f = FindField(path); f != nullptr && name.find('.') == std::string::npos) {
    st.marks[path] = key.Mark();
    YAML::Mark mark = key.Mark();
    std::optional<std::string> error = SetFromNode(*f, st.config, value, &mark);
    return error ? InvalidArgument(Where(st.file, mark) + *error) : Status::Ok();
  }
  if (IsSection(path) && name.find('.') == std::string::npos) {
    st.marks[path] = key.Mark();
    if (value.IsNull()) return Status::Ok();  // `tls:` with nothing under it
    if (!value.IsMap()) {
      return InvalidArgument(where + path + ": expected a mapping, got " + Describe(value));
    }
    return WalkMapping(value, path, st);
  }
  std::string hint = DidYouMean(name, ChildKeys(section));
  if (name.find('.') != std::string::npos && (FindField(path) || IsSection(path))) {
    hint = " (dotted keys are not supported: nest it as a mapping)";
  }
  return InvalidArgument(where + "unknown key '" + path + "'" + hint);
}

Status WalkMapping(const YAML::Node& map, const std::string& section, ParseState& st) {
  std::set<std::string, std::less<>> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (it->first.IsScalar() && !seen.insert(it->first.Scalar()).second) {
      const std::string path = (section.empty() ? "" : section + ".") + it->first.Scalar();
      return InvalidArgument(Where(st.file, it->first.Mark()) + "duplicate key '" + path + "'");
    }
    PAGODA_RETURN_IF_ERROR(WalkEntry(it->first, it->second, section, st));
  }
  return Status::Ok();
}

// An error about `path` for ValidateImpl: prefixed with the key's position when known.
Status KeyError(const MarkMap* marks, const std::string& file, std::string_view path,
                const std::string& message) {
  YAML::Mark mark = YAML::Mark::null_mark();
  if (marks != nullptr) {
    if (auto it = marks->find(path); it != marks->end()) mark = it->second;
  }
  return InvalidArgument(Where(file, mark) + message);
}

// Rules that involve more than one key.
Status ValidateCrossKeys(const PagodaConfig& c, const MarkMap* marks, const std::string& file) {
  const TlsConfig& tls = c.server.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    const bool has_cert = !tls.cert_file.empty();
    return KeyError(marks, file, has_cert ? "server.tls.cert_file" : "server.tls.key_file",
                    std::string("server.tls: ") + (has_cert ? "cert_file" : "key_file") +
                        " is set but " + (has_cert ? "key_file" : "cert_file") +
                        " is not (set both for TLS, or neither)");
  }
  if (!c.server.auth.bearer_token.empty() && !c.server.auth.bearer_token_file.empty()) {
    return KeyError(marks, file, "server.auth.bearer_token_file",
                    "server.auth: set at most one of bearer_token and bearer_token_file");
  }
  const auto ends_with_port0 = [](const std::string& a) {
    return a.size() >= 2 && a.compare(a.size() - 2, 2, ":0") == 0;
  };
  if (c.server.listen_address == c.server.metrics_address &&
      !ends_with_port0(c.server.listen_address)) {  // port 0: both get their own free port
    return KeyError(marks, file, "server.metrics_address",
                    "server.metrics_address: must differ from server.listen_address (" +
                        c.server.listen_address + ")");
  }
  for (const std::string* other : {&c.server.listen_address, &c.server.metrics_address}) {
    // Empty = that listener is off; two listeners that are both off do not collide.
    if (!other->empty() && c.server.http_address == *other && !ends_with_port0(*other)) {
      return KeyError(marks, file, "server.http_address",
                      "server.http_address: must differ from server.listen_address and "
                      "server.metrics_address (" +
                          *other + ")");
    }
  }
  const int32_t max_model_len = c.runtime.engine.max_model_len;
  if (max_model_len > 0 && c.server.max_tokens_limit > max_model_len) {
    return KeyError(marks, file, "server.max_tokens_limit",
                    "server.max_tokens_limit: must be <= engine.max_model_len (" +
                        std::to_string(max_model_len) + ")");
  }
  return Status::Ok();
}

// The key an owning layer's error names: its message up to the first ':' (or '['), so the error
// can point at the key's position in the file.
std::string_view ErrorKey(const std::string& message) {
  return std::string_view(message).substr(0, message.find_first_of(":["));
}

Status ValidateImpl(const PagodaConfig& c, const MarkMap* marks, const std::string& file) {
  for (const Field& f : Fields()) {
    if (std::optional<std::string> error = CheckField(f, c)) {
      return KeyError(marks, file, f.path, *error);
    }
  }
  if (Status st = ValidateRuntimeConfig(c.runtime); !st.ok()) {
    return KeyError(marks, file, ErrorKey(st.message()), st.message());
  }
  return ValidateCrossKeys(c, marks, file);
}

// Where each document of a YAML stream starts, and where its first node is.
class DocumentMarks : public YAML::EventHandler {
 public:
  struct Document {
    YAML::Mark start;
    std::optional<YAML::Mark> first_node;
  };
  std::vector<Document> documents;

  void OnDocumentStart(const YAML::Mark& mark) override { documents.push_back({mark, {}}); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnMapEnd() override {}

 private:
  void Node(const YAML::Mark& mark) {
    if (!documents.empty() && !documents.back().first_node) documents.back().first_node = mark;
  }
};

// The config's one YAML document. Not YAML::LoadAll: yaml-cpp 0.7's LoadAll never returns on a
// stray flow indicator at the top level (a lone ",": every HandleNextDocument call reports a new
// empty document at the same place), so documents are counted here, each required to start
// past the one before it. The text is parsed twice (the count, then YAML::Load for the node:
// yaml-cpp keeps its node builder private); a config is small and read once.
Result<YAML::Node> LoadOneDocument(std::string_view yaml_text, const std::string& filename) {
  std::istringstream in{std::string(yaml_text)};
  YAML::Parser parser(in);
  DocumentMarks marks;
  std::vector<DocumentMarks::Document>& docs = marks.documents;
  while (parser.HandleNextDocument(marks)) {
    if (docs.size() >= 2 && docs.back().start.pos <= docs[docs.size() - 2].start.pos) {
      const size_t pos = static_cast<size_t>(std::max(docs.back().start.pos, 0));
      const std::string what =
          pos < yaml_text.size() ? "'" + std::string(1, yaml_text[pos]) + "'" : "end of input";
      return InvalidArgument(Where(filename, docs.back().start) + "YAML syntax error: unexpected " +
                             what + " outside a flow collection");
    }
  }
  if (docs.size() > 1) {
    return InvalidArgument(Where(filename, docs[1].first_node.value_or(docs[1].start)) +
                           "expected one YAML document, got " + std::to_string(docs.size()));
  }
  return YAML::Load(std::string(yaml_text));
}

Result<PagodaConfig> ParseUnguarded(std::string_view yaml_text, const std::string& filename) {
  PAGODA_ASSIGN_OR_RETURN(const YAML::Node doc, LoadOneDocument(yaml_text, filename));
  ParseState st{filename, PagodaConfig{}, {}};
  if (!doc || doc.IsNull()) return st.config;
  if (!doc.IsMap()) {
    return InvalidArgument(Where(filename, doc.Mark()) +
                           "expected a mapping of sections (server, model, engine, kv_cache, "
                           "backend, logging) at the top level, got " +
                           Describe(doc));
  }
  PAGODA_RETURN_IF_ERROR(WalkMapping(doc, "", st));
  PAGODA_RETURN_IF_ERROR(ValidateImpl(st.config, &st.marks, filename));
  return st.config;
}

// Emits one field's value: free-form strings double-quoted so they read back as strings.
void EmitValue(YAML::Emitter& out, const Field& f, const PagodaConfig& c) {
  const FieldPtr p = GetConst(f, c);
  if (auto* i32 = std::get_if<int32_t*>(&p)) out << **i32;
  if (auto* i64 = std::get_if<int64_t*>(&p)) out << **i64;
  if (auto* b = std::get_if<bool*>(&p)) out << YAML::TrueFalseBool << **b;
  if (auto* str = std::get_if<std::string*>(&p)) {
    if (f.kind == Kind::kChoice) {
      out << **str;
    } else {
      out << YAML::DoubleQuoted << **str;
    }
  }
  if (f.kind == Kind::kEnum) out << EnumText(p);
  if (auto* list = std::get_if<std::vector<std::string>*>(&p)) {
    out << YAML::Flow << YAML::BeginSeq;
    for (const std::string& item : **list) out << YAML::DoubleQuoted << item;
    out << YAML::EndSeq;
  }
}

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot = path.find('.'); dot != std::string_view::npos; dot = path.find('.', start)) {
    parts.emplace_back(path.substr(start, dot - start));
    start = dot + 1;
  }
  parts.emplace_back(path.substr(start));
  return parts;
}

}  // namespace

Result<PagodaConfig> ParseConfig(std::string_view yaml_text, const std::string& filename) {
  try {
    return ParseUnguarded(yaml_text, filename);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(Where(filename, e.mark) + "YAML syntax error: " + e.msg);
  }
}

Result<PagodaConfig> LoadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFound(path + ": cannot open config file: " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return DataLoss(path + ": read error: " + std::strerror(errno));
  return ParseConfig(text.str(), path);
}

Status ApplyOverride(PagodaConfig& config, std::string_view assignment) {
  const std::string where = "--set '" + std::string(assignment) + "': ";
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return InvalidArgument(where + "expected key.path=value, e.g. engine.max_num_seqs=8");
  }
  const std::string path(assignment.substr(0, eq));
  const Field* f = FindField(path);
  if (f == nullptr) {
    std::vector<std::string> all;
    for (const Field& field : Fields()) all.emplace_back(field.path);
    if (IsSection(path)) {
      return InvalidArgument(where + "'" + path + "' is a section; set one of its keys, e.g. '" +
                             path + "." + ChildKeys(path).front() + "'");
    }
    return InvalidArgument(where + "unknown key '" + path + "'" + DidYouMean(path, all));
  }
  YAML::Node value;
  try {
    value = YAML::Load(std::string(assignment.substr(eq + 1)));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(where + path + ": YAML syntax error in the value: " + e.msg);
  }
  std::optional<std::string> error = SetFromNode(*f, config, value);
  return error ? InvalidArgument(where + *error) : Status::Ok();
}

Status ValidateConfig(const PagodaConfig& config) { return ValidateImpl(config, nullptr, ""); }

std::string DumpConfig(const PagodaConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::vector<std::string> open;  // the sections currently open, outermost first
  for (const Field& f : Fields()) {
    std::vector<std::string> parts = SplitPath(f.path);
    const std::string leaf = parts.back();
    parts.pop_back();
    size_t common = 0;
    while (common < open.size() && common < parts.size() && open[common] == parts[common]) {
      ++common;
    }
    for (; open.size() > common; open.pop_back()) out << YAML::EndMap;
    for (; open.size() < parts.size(); open.push_back(parts[open.size()])) {
      out << YAML::Key << parts[open.size()] << YAML::Value << YAML::BeginMap;
    }
    out << YAML::Key << leaf << YAML::Value;
    EmitValue(out, f, config);
  }
  for (; !open.empty(); open.pop_back()) out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

PagodaConfig RedactSecrets(PagodaConfig config) {
  if (!config.server.auth.bearer_token.empty()) config.server.auth.bearer_token = kRedacted;
  return config;
}

std::string DefaultDemoModelPath() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::string cache;
  if (xdg != nullptr && xdg[0] == '/') {  // the XDG spec ignores relative paths
    cache = xdg;
  } else if (home != nullptr && home[0] != '\0') {
    cache = std::string(home) + "/.cache";
  } else {
    cache = "/tmp";
  }
  return cache + "/pagoda/demo-tiny.gguf";
}

std::string ResolvedModelPath(const PagodaConfig& config) {
  return config.model.path.empty() ? DefaultDemoModelPath() : config.model.path;
}

}  // namespace pagoda
