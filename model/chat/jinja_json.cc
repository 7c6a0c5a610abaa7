#include "model/chat/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "model/chat/jinja_repr.h"
#include "model/chat/jinja_unicode.h"

namespace pagoda::jinja {
namespace {

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  *out += '"';
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    const char32_t c = DecodeUtf8(s, &i);
    switch (c) {
      case '"':
        *out += "\\\"";
        continue;
      case '\\':
        *out += "\\\\";
        continue;
      case '\n':
        *out += "\\n";
        continue;
      case '\r':
        *out += "\\r";
        continue;
      case '\t':
        *out += "\\t";
        continue;
      case '\b':
        *out += "\\b";
        continue;
      case '\f':
        *out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7F && c < 0x10000)) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      *out += buf;
    } else if (ensure_ascii && c >= 0x10000) {
      const char32_t v = c - 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                    static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      *out += buf;
    } else {
      AppendUtf8(out, c);
    }
  }
  *out += '"';
}

std::string JsonFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return FloatRepr(d);
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o) : o_(o) {
    item_sep_ = !o.item_separator.empty() ? o.item_separator : (o.has_indent ? "," : ", ");
    key_sep_ = !o.key_separator.empty() ? o.key_separator : ": ";
  }

  Status Dump(const Value& v, int depth) {
    if (depth > kMaxNesting + 1) return InvalidArgument("Circular reference detected");
    switch (v.type()) {
      case Value::Type::kNone:
        out_ += "null";
        return Status::Ok();
      case Value::Type::kBool:
        out_ += v.as_int() ? "true" : "false";
        return Status::Ok();
      case Value::Type::kInt:
        out_ += std::to_string(v.as_int());
        return Status::Ok();
      case Value::Type::kFloat:
        out_ += JsonFloat(v.as_double());
        return Status::Ok();
      case Value::Type::kString:
        AppendJsonString(v.str(), o_.ensure_ascii, &out_);
        return Status::Ok();
      case Value::Type::kList:
        return DumpList(v.list().items, depth);
      case Value::Type::kDict:
        return DumpDict(v.dict(), depth);
      default:
        return InvalidArgument("Object of type " + TypeName(v) + " is not JSON serializable");
    }
  }

  std::string Take() { return std::move(out_); }

 private:
  void NewLine(int depth) {
    if (!o_.has_indent) return;
    out_ += '\n';
    for (int i = 0; i < depth; ++i) out_ += o_.indent;
  }

  Status DumpList(const std::vector<Value>& items, int depth) {
    if (items.empty()) {
      out_ += "[]";
      return Status::Ok();
    }
    out_ += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_ += item_sep_;
      NewLine(depth + 1);
      PAGODA_RETURN_IF_ERROR(Dump(items[i], depth + 1));
    }
    NewLine(depth);
    out_ += ']';
    return Status::Ok();
  }

  Result<std::string> KeyString(const Value& k) {
    switch (k.type()) {
      case Value::Type::kString:
        return k.str();
      case Value::Type::kNone:
        return std::string("null");
      case Value::Type::kBool:
        return std::string(k.as_int() ? "true" : "false");
      case Value::Type::kInt:
        return std::to_string(k.as_int());
      case Value::Type::kFloat:
        return JsonFloat(k.as_double());
      default:
        return InvalidArgument("keys must be str, int, float, bool or None, not " + TypeName(k));
    }
  }

  Status DumpDict(const Dict& d, int depth) {
    if (d.size() == 0) {
      out_ += "{}";
      return Status::Ok();
    }
    std::vector<std::pair<std::string, const Value*>> items;
    for (const auto& [k, v] : d.entries()) {
      PAGODA_ASSIGN_OR_RETURN(std::string key, KeyString(k));
      items.emplace_back(std::move(key), &v);
    }
    if (o_.sort_keys) {
      std::stable_sort(items.begin(), items.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    out_ += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_ += item_sep_;
      NewLine(depth + 1);
      AppendJsonString(items[i].first, o_.ensure_ascii, &out_);
      out_ += key_sep_;
      PAGODA_RETURN_IF_ERROR(Dump(*items[i].second, depth + 1));
    }
    NewLine(depth);
    out_ += '}';
    return Status::Ok();
  }

  const JsonDumpOptions& o_;
  std::string item_sep_, key_sep_;
  std::string out_;
};

Result<Value> FromJsonAt(const nlohmann::ordered_json& j, bool content,
                         const std::vector<std::string>& template_keys, int depth) {
  if (depth > kMaxNesting) {
    return InvalidArgument("variables nested more than " + std::to_string(kMaxNesting) +
                           " levels deep");
  }
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null:
      return Value::NoneValue();
    case T::boolean:
      return Value::Bool(j.get<bool>());
    case T::number_integer:
      return Value::Int(j.get<int64_t>());
    case T::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Value::Float(static_cast<double>(u));
      }
      return Value::Int(static_cast<int64_t>(u));
    }
    case T::number_float:
      return Value::Float(j.get<double>());
    case T::string:
      return Value::Str(j.get<std::string>(), content);
    case T::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) {
        PAGODA_ASSIGN_OR_RETURN(Value v, FromJsonAt(x, content, template_keys, depth + 1));
        items.push_back(std::move(v));
      }
      return MakeList(std::move(items));
    }
    case T::object: {
      std::vector<std::pair<Value, Value>> entries;
      entries.reserve(j.size());
      for (const auto& [k, x] : j.items()) {
        const bool trusted =
            std::find(template_keys.begin(), template_keys.end(), k) != template_keys.end();
        PAGODA_ASSIGN_OR_RETURN(Value v,
                                FromJsonAt(x, content && !trusted, template_keys, depth + 1));
        entries.emplace_back(Value::Str(k, content), std::move(v));
      }
      return MakeDict(std::move(entries));
    }
    default:
      return InvalidArgument("unsupported JSON value (binary or discarded)");
  }
}

}  // namespace

Result<std::string> DumpJson(const Value& v, const JsonDumpOptions& options) {
  Dumper d(options);
  PAGODA_RETURN_IF_ERROR(d.Dump(v, 0));
  return d.Take();
}

Result<Value> ValueFromJson(const nlohmann::ordered_json& j, bool content,
                            const std::vector<std::string>& template_keys) {
  return FromJsonAt(j, content, template_keys, 0);
}

}  // namespace pagoda::jinja
