#include "server/config.h"

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
#include <variant>
#include <vector>

namespace pagoda {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// How a key's value is checked and printed.
enum class Kind {
  kInt,      // decimal integer in [min, max]
  kPow2,     // power of two in [min, max]
  kBool,     // true / false
  kString,   // any string
  kEnum,     // one of `choices`
  kAddress,  // host:port, [v6]:port or unix:PATH (optionally "" = disabled)
  kIdList,   // a YAML sequence of distinct non-empty strings (null = empty)
};

using FieldPtr = std::variant<int32_t*, int64_t*, bool*, std::string*, std::vector<std::string>*>;
using Getter = FieldPtr (*)(PagodaConfig&);

// One leaf key of the configuration: its full dotted path and where it lives in PagodaConfig.
struct Field {
  std::string_view path;
  Kind kind;
  Getter get;
  int64_t min = 0;
  int64_t max = 0;
  std::vector<std::string_view> choices;  // kEnum
  bool allow_empty = false;               // kAddress
};

#define PAGODA_CFG(member) [](PagodaConfig& c) -> FieldPtr { return &c.member; }

Field Int(std::string_view path, int64_t min, int64_t max, Getter get) {
  return {path, Kind::kInt, get, min, max, {}, false};
}
Field Pow2(std::string_view path, int64_t min, int64_t max, Getter get) {
  return {path, Kind::kPow2, get, min, max, {}, false};
}
Field Bool(std::string_view path, Getter get) { return {path, Kind::kBool, get, 0, 0, {}, false}; }
Field Str(std::string_view path, Getter get) { return {path, Kind::kString, get, 0, 0, {}, false}; }
Field Enum(std::string_view path, std::vector<std::string_view> choices, Getter get) {
  return {path, Kind::kEnum, get, 0, 0, std::move(choices), false};
}
Field Address(std::string_view path, bool allow_empty, Getter get) {
  return {path, Kind::kAddress, get, 0, 0, {}, allow_empty};
}
Field IdList(std::string_view path, Getter get) {
  return {path, Kind::kIdList, get, 0, 0, {}, false};
}

// Every key, in the order of configs/default.yaml and DumpConfig.
const std::vector<Field>& Fields() {
  static const std::vector<Field> kFields = {
      Address("server.listen_address", false, PAGODA_CFG(server.listen_address)),
      Address("server.metrics_address", true, PAGODA_CFG(server.metrics_address)),
      Int("server.max_waiting_requests", 1, kInt32Max, PAGODA_CFG(server.max_waiting_requests)),
      Int("server.max_message_bytes", 1024, kInt32Max, PAGODA_CFG(server.max_message_bytes)),
      Int("server.max_tokens_limit", 0, kInt32Max, PAGODA_CFG(server.max_tokens_limit)),
      Int("server.shutdown_grace_seconds", 0, 3600, PAGODA_CFG(server.shutdown_grace_seconds)),
      Str("server.tls.cert_file", PAGODA_CFG(server.tls.cert_file)),
      Str("server.tls.key_file", PAGODA_CFG(server.tls.key_file)),
      Str("server.auth.bearer_token", PAGODA_CFG(server.auth.bearer_token)),
      Str("server.auth.bearer_token_file", PAGODA_CFG(server.auth.bearer_token_file)),
      Str("model.path", PAGODA_CFG(model.path)),
      Str("model.name", PAGODA_CFG(model.name)),
      Enum("model.chat_template", {"", "chatml", "llama3", "llama2", "mistral"},
           PAGODA_CFG(model.chat_template)),
      Int("engine.max_num_seqs", 1, kInt32Max, PAGODA_CFG(engine.max_num_seqs)),
      Int("engine.max_num_batched_tokens", 1, kInt32Max, PAGODA_CFG(engine.max_num_batched_tokens)),
      Int("engine.max_num_partial_prefills", 1, kInt32Max,
          PAGODA_CFG(engine.max_num_partial_prefills)),
      Int("engine.max_prefill_chunk", 0, kInt32Max, PAGODA_CFG(engine.max_prefill_chunk)),
      Enum("engine.policy", {"fcfs", "priority"}, PAGODA_CFG(engine.policy)),
      Int("engine.max_model_len", 0, kInt32Max, PAGODA_CFG(engine.max_model_len)),
      Pow2("kv_cache.block_size", 1, 256, PAGODA_CFG(kv_cache.block_size)),
      Enum("kv_cache.dtype", {"auto", "f32", "bf16", "f16", "fp8_e4m3"},
           PAGODA_CFG(kv_cache.dtype)),
      Int("kv_cache.memory_bytes", 1, kInt64Max, PAGODA_CFG(kv_cache.memory_bytes)),
      Int("kv_cache.num_blocks", 0, kInt32Max, PAGODA_CFG(kv_cache.num_blocks)),
      Bool("kv_cache.enable_prefix_caching", PAGODA_CFG(kv_cache.enable_prefix_caching)),
      Enum("backend.type", {"cpu", "neuron"}, PAGODA_CFG(backend.type)),
      Int("backend.threads", 0, 4096, PAGODA_CFG(backend.threads)),
      Str("neuron.runtime_library", PAGODA_CFG(neuron.runtime_library)),
      Str("neuron.artifacts_dir", PAGODA_CFG(neuron.artifacts_dir)),
      Str("neuron.manifest", PAGODA_CFG(neuron.manifest)),
      Str("neuron.visible_cores", PAGODA_CFG(neuron.visible_cores)),
      Int("neuron.logical_nc_config", 1, 2, PAGODA_CFG(neuron.logical_nc_config)),
      Int("neuron.vnc", -1, 1024, PAGODA_CFG(neuron.vnc)),
      Int("neuron.exec_timeout_s", 1, 3600, PAGODA_CFG(neuron.exec_timeout_s)),
      Enum("neuron.runtime_log_level", {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"},
           PAGODA_CFG(neuron.runtime_log_level)),
      Bool("neuron.warmup", PAGODA_CFG(neuron.warmup)),
      IdList("neuron.buckets.enable", PAGODA_CFG(neuron.buckets_enable)),
      Enum("logging.level", {"trace", "debug", "info", "warn", "error"}, PAGODA_CFG(logging.level)),
      Enum("logging.format", {"text", "json"}, PAGODA_CFG(logging.format)),
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

std::string Expectation(const Field& f) {
  const std::string min = std::to_string(f.min);
  const std::string max = std::to_string(f.max);
  const bool unbounded = f.max == kInt32Max || f.max == kInt64Max;
  switch (f.kind) {
    case Kind::kInt:
      return unbounded ? "an integer >= " + min : "an integer in " + min + ".." + max;
    case Kind::kPow2:
      return "a power of two in " + min + ".." + max;
    case Kind::kBool:
      return "true or false";
    case Kind::kString:
      return "a string";
    case Kind::kEnum: {
      std::string s = "one of ";
      for (size_t i = 0; i < f.choices.size(); ++i) {
        s += (i > 0 ? ", " : "") + std::string(f.choices[i]);
      }
      return s;
    }
    case Kind::kAddress:
      return std::string(f.allow_empty ? "\"\" (disabled) or " : "") +
             "host:port, [ipv6]:port or unix:PATH";
    case Kind::kIdList:
      return "a list of program ids, e.g. [\"decode_b8\", \"prefill_t512\"]";
  }
  return "a value";
}

std::string Expected(const Field& f, const std::string& got) {
  return std::string(f.path) + ": expected " + Expectation(f) + ", got " + got;
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

bool IntInRange(const Field& f, int64_t v) {
  if (v < f.min || v > f.max) return false;
  return f.kind != Kind::kPow2 || (v & (v - 1)) == 0;
}

bool StringValid(const Field& f, std::string_view s) {
  switch (f.kind) {
    case Kind::kEnum:
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

// The error of item `i` of a kIdList value ("path[i]: ..."): empty, or equal to an earlier item.
std::optional<std::string> ListItemError(const Field& f, const std::vector<std::string>& list,
                                         size_t i) {
  if (list[i].empty()) return ExpectedProgramId(f, i, "\"\"");
  if (std::find(list.begin(), list.begin() + i, list[i]) != list.begin() + i) {
    return ItemKey(f, i) + ": duplicate program id " + Quote(list[i]);
  }
  return std::nullopt;
}

// The error of a field's current value ("path: expected ..., got ..."), if any.
std::optional<std::string> CheckField(const Field& f, const PagodaConfig& c) {
  const FieldPtr p = GetConst(f, c);
  if (auto* i32 = std::get_if<int32_t*>(&p)) {
    if (!IntInRange(f, **i32)) return Expected(f, std::to_string(**i32));
  } else if (auto* i64 = std::get_if<int64_t*>(&p)) {
    if (!IntInRange(f, **i64)) return Expected(f, std::to_string(**i64));
  } else if (auto* str = std::get_if<std::string*>(&p)) {
    if (!StringValid(f, **str)) return Expected(f, Quote(**str));
  } else if (auto* list = std::get_if<std::vector<std::string>*>(&p)) {
    for (size_t i = 0; i < (*list)->size(); ++i) {
      if (std::optional<std::string> e = ListItemError(f, **list, i)) return e;
    }
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
  if (!node.IsNull() && !node.IsSequence()) return Expected(f, Describe(node));
  for (size_t i = 0; node.IsSequence() && i < node.size(); ++i) {
    const YAML::Node item = node[i];
    std::optional<std::string> error;
    if (!item.IsScalar()) {
      error = ExpectedProgramId(f, i, Describe(item));
    } else {
      list.push_back(item.Scalar());
      error = ListItemError(f, list, i);
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
  if (!node.IsScalar() && !node.IsNull()) return Expected(f, Describe(node));
  const std::string text = node.IsNull() ? "" : node.Scalar();
  const FieldPtr p = f.get(c);
  if (std::holds_alternative<int32_t*>(p) || std::holds_alternative<int64_t*>(p)) {
    const std::optional<int64_t> v = node.IsNull() ? std::nullopt : ParseInt(text);
    if (!v || !IntInRange(f, *v)) return Expected(f, Describe(node));
    if (auto* i32 = std::get_if<int32_t*>(&p)) **i32 = static_cast<int32_t>(*v);
    if (auto* i64 = std::get_if<int64_t*>(&p)) **i64 = *v;
  } else if (auto* b = std::get_if<bool*>(&p)) {
    const std::optional<bool> v = node.IsNull() ? std::nullopt : ParseBool(text);
    if (!v) return Expected(f, Describe(node));
    **b = *v;
  } else if (auto* str = std::get_if<std::string*>(&p)) {
    if ((f.kind == Kind::kEnum && node.IsNull()) || !StringValid(f, text)) {
      return Expected(f, Describe(node));
    }
    **str = text;
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
  if (c.engine.max_num_batched_tokens < c.engine.max_num_seqs) {
    return KeyError(marks, file, "engine.max_num_batched_tokens",
                    "engine.max_num_batched_tokens: must be >= engine.max_num_seqs (" +
                        std::to_string(c.engine.max_num_seqs) + ") so every decode fits a step");
  }
  if (c.engine.max_model_len > 0 && c.server.max_tokens_limit > c.engine.max_model_len) {
    return KeyError(marks, file, "server.max_tokens_limit",
                    "server.max_tokens_limit: must be <= engine.max_model_len (" +
                        std::to_string(c.engine.max_model_len) + ")");
  }
  return Status::Ok();
}

Status ValidateImpl(const PagodaConfig& c, const MarkMap* marks, const std::string& file) {
  for (const Field& f : Fields()) {
    if (std::optional<std::string> error = CheckField(f, c)) {
      return KeyError(marks, file, f.path, *error);
    }
  }
  return ValidateCrossKeys(c, marks, file);
}

Result<PagodaConfig> ParseUnguarded(std::string_view yaml_text, const std::string& filename) {
  const std::vector<YAML::Node> docs = YAML::LoadAll(std::string(yaml_text));
  if (docs.size() > 1) {
    return InvalidArgument(Where(filename, docs[1].Mark()) + "expected one YAML document, got " +
                           std::to_string(docs.size()));
  }
  ParseState st{filename, PagodaConfig{}, {}};
  if (docs.empty() || docs[0].IsNull()) return st.config;
  if (!docs[0].IsMap()) {
    return InvalidArgument(Where(filename, docs[0].Mark()) +
                           "expected a mapping of sections (server, model, engine, kv_cache, "
                           "backend, logging) at the top level, got " +
                           Describe(docs[0]));
  }
  PAGODA_RETURN_IF_ERROR(WalkMapping(docs[0], "", st));
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
    if (f.kind == Kind::kEnum) {
      out << **str;
    } else {
      out << YAML::DoubleQuoted << **str;
    }
  }
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

RuntimeOptions ToRuntimeOptions(const PagodaConfig& config) {
  RuntimeOptions o;
  o.block_size = config.kv_cache.block_size;
  o.kv_dtype = config.kv_cache.dtype;
  o.num_blocks = config.kv_cache.num_blocks;
  o.kv_memory_bytes = config.kv_cache.memory_bytes;
  o.enable_prefix_caching = config.kv_cache.enable_prefix_caching;
  o.scheduler.max_num_seqs = config.engine.max_num_seqs;
  o.scheduler.max_num_batched_tokens = config.engine.max_num_batched_tokens;
  o.scheduler.max_num_partial_prefills = config.engine.max_num_partial_prefills;
  o.scheduler.max_prefill_chunk = config.engine.max_prefill_chunk;
  o.scheduler.policy =
      config.engine.policy == "priority" ? SchedulingPolicy::kPriority : SchedulingPolicy::kFcfs;
  o.max_waiting_requests = config.server.max_waiting_requests;
  o.max_model_len = config.engine.max_model_len;
  o.backend = config.backend.type;
  o.threads = config.backend.threads;
  o.neuron = config.neuron;
  return o;
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
