// jinja2's built-in filters (and Hugging Face's tojson).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/chat/jinja_access.h"
#include "model/chat/jinja_builtins.h"
#include "model/chat/jinja_filters_internal.h"
#include "model/chat/jinja_format.h"
#include "model/chat/jinja_json.h"
#include "model/chat/jinja_operators.h"
#include "model/chat/jinja_repr.h"
#include "model/chat/jinja_unicode.h"

namespace pagoda::jinja {
namespace {

using Type = Value::Type;

Result<Value> Length(Context&, const Value& v, const Args&) {
  switch (v.type()) {
    case Type::kUndefined:
      return Value::Int(0);
    case Type::kString:
      return Value::Int(static_cast<int64_t>(CountCodePoints(v.str())));
    case Type::kList:
      return Value::Int(static_cast<int64_t>(v.list().items.size()));
    case Type::kDict:
      return Value::Int(static_cast<int64_t>(v.dict().size()));
    default:
      return InvalidArgument("object of type '" + TypeName(v) + "' has no len()");
  }
}

Result<Value> Default(Context&, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("default", args, {"default_value", "boolean"}));
  const bool boolean = a[1] && Truthy(*a[1]);
  if (v.is_undefined() || (boolean && !Truthy(v))) return a[0] ? *a[0] : Value::Str("");
  return v;
}

Result<Value> StringFilter(Context&, const Value& v, const Args&) {
  PAGODA_ASSIGN_OR_RETURN(Text t, ToText(v));
  return Value::Str(std::move(t));
}

Result<Value> Trim(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("trim", args, {"chars"}));
  PAGODA_ASSIGN_OR_RETURN(Text t, ToText(v));
  Args strip_args;
  if (a[0] && !a[0]->is_none()) strip_args.positional.push_back(*a[0]);
  return CallMethod(ctx, Value::Str(std::move(t)), "strip", strip_args);
}

template <std::string (*Fn)(std::string_view)>
Result<Value> CaseFilter(Context&, const Value& v, const Args&) {
  PAGODA_ASSIGN_OR_RETURN(Text t, ToText(v));
  return Value::Str(Fn(t.str()), t.has_content());
}

// jinja2's |title: words split at whitespace and - ( { [ <; first letter up, the rest down.
std::string JinjaTitle(std::string_view s) {
  std::string out;
  bool word_start = true;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const char32_t c = DecodeUtf8(s, &i);
    const bool sep = IsPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    const std::string_view one = s.substr(at, i - at);
    out += sep ? std::string(one) : (word_start ? PyUpper(one) : PyLower(one));
    word_start = sep;
  }
  return out;
}

Result<Value> Replace(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(Text t, ToText(v));
  return CallMethod(ctx, Value::Str(std::move(t)), "replace", args);
}

Result<Value> Items(Context& ctx, const Value& v, const Args&) {
  if (v.is_undefined()) return MakeList({});
  if (!v.is(Type::kDict)) return InvalidArgument("Can only get item pairs from a mapping.");
  PAGODA_RETURN_IF_ERROR(ctx.Work(v.dict().size() * 2));
  std::vector<Value> pairs;
  for (const auto& [k, x] : v.dict().entries()) {
    PAGODA_ASSIGN_OR_RETURN(Value pair, MakeList({k, x}, true));
    pairs.push_back(std::move(pair));
  }
  return MakeList(std::move(pairs));
}

Result<Value> ListFilter(Context& ctx, const Value& v, const Args&) {
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  return MakeList(std::move(items));
}

Result<Value> First(Context& ctx, const Value& v, const Args&) {
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  if (items.empty()) return Value::MakeUndefined("No first item, sequence was empty.");
  return items.front();
}

Result<Value> Last(Context& ctx, const Value& v, const Args&) {
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  if (items.empty()) return Value::MakeUndefined("No last item, sequence was empty.");
  return items.back();
}

Result<Value> Join(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("join", args, {"d", "attribute"}));
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  Text sep;
  if (a[0]) {
    PAGODA_ASSIGN_OR_RETURN(sep, ToText(*a[0]));
  }
  Text out;
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (a[1] && !a[1]->is_none()) {
      PAGODA_ASSIGN_OR_RETURN(item, GetPath(ctx, item, ToText(*a[1])->str()));
    }
    PAGODA_ASSIGN_OR_RETURN(Text t, ToText(item));
    if (i > 0) out.Append(sep);
    out.Append(t);
    PAGODA_RETURN_IF_ERROR(ctx.CheckStringSize(out.size()));
  }
  PAGODA_RETURN_IF_ERROR(ctx.Built(out.size()));
  return Value::Str(std::move(out));
}

Result<Value> ToJson(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(
      auto a, BindArgs("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonDumpOptions o;
  o.ensure_ascii = a[0] && Truthy(*a[0]);
  if (a[1] && !a[1]->is_none()) {
    o.has_indent = true;
    if (a[1]->is_string()) {
      o.indent = a[1]->str();
    } else if (a[1]->is_int()) {
      PAGODA_RETURN_IF_ERROR(ctx.CheckStringSize(std::max<int64_t>(0, a[1]->as_int())));
      o.indent = std::string(std::max<int64_t>(0, a[1]->as_int()), ' ');
    } else {
      return InvalidArgument("tojson: indent must be an integer or a string");
    }
  }
  if (a[2] && !a[2]->is_none()) {
    if (!a[2]->is(Type::kList) || a[2]->list().items.size() != 2 ||
        !a[2]->list().items[0].is_string() || !a[2]->list().items[1].is_string()) {
      return InvalidArgument("tojson: separators must be a pair of strings");
    }
    o.item_separator = a[2]->list().items[0].str();
    o.key_separator = a[2]->list().items[1].str();
  }
  o.sort_keys = a[3] && Truthy(*a[3]);
  PAGODA_ASSIGN_OR_RETURN(std::string s, DumpJson(v, o));
  PAGODA_RETURN_IF_ERROR(ctx.Built(s.size()));
  return Value::Str(std::move(s), HasContent(v));
}

// jinja2's |indent: every line but the first (and the first too with first=true) gets `width`
// more spaces (or the `width` string); blank lines only with blank=true.
Result<Value> Indent(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("indent", args, {"width", "first", "blank"}));
  std::string indention = "    ";
  if (a[0]) {
    if (a[0]->is_string()) {
      indention = a[0]->str();
    } else if (a[0]->is_int()) {
      PAGODA_RETURN_IF_ERROR(ctx.CheckStringSize(std::max<int64_t>(0, a[0]->as_int())));
      indention = std::string(std::max<int64_t>(0, a[0]->as_int()), ' ');
    } else {
      return InvalidArgument("indent: width must be an integer or a string");
    }
  }
  const bool first = a[1] && Truthy(*a[1]);
  const bool blank = a[2] && Truthy(*a[2]);
  if (!v.is_string()) {  // jinja2 appends "\n" to the value itself
    return InvalidArgument("unsupported operand type(s) for +=: '" + TypeName(v) + "' and 'str'");
  }
  const Text& t = v.text();
  PAGODA_ASSIGN_OR_RETURN(Value lines_value,
                          CallMethod(ctx, Value::Str(t.str() + "\n"), "splitlines", Args{}));
  const auto& lines = lines_value.list().items;
  PAGODA_RETURN_IF_ERROR(
      ctx.CheckStringSize(t.size() + (lines.size() + 1) * (indention.size() + 1)));
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].str();
    if (i > 0) out += "\n";
    if ((i == 0 && first) || (i > 0 && (blank || !line.empty()))) out += indention;
    out += line;
  }
  if (lines.empty() && first) out = indention;
  PAGODA_RETURN_IF_ERROR(ctx.Built(out.size()));
  return Value::Str(std::move(out), t.has_content());
}

Result<Value> Abs(Context&, const Value& v, const Args&) {
  if (v.is(Type::kFloat)) return Value::Float(std::fabs(v.as_double()));
  if (v.is_int()) {
    if (v.as_int() == INT64_MIN) return InvalidArgument("integer overflow in abs");
    return Value::Int(std::llabs(v.as_int()));
  }
  return InvalidArgument("bad operand type for abs(): '" + TypeName(v) + "'");
}

Result<Value> IntFilter(Context&, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("int", args, {"default", "base"}));
  const Value dflt = a[0] ? *a[0] : Value::Int(0);
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_int()) return Value::Int(v.as_int());
  if (v.is(Type::kFloat)) {
    const double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return dflt;
    return Value::Int(static_cast<int64_t>(std::trunc(d)));
  }
  if (!v.is_string()) return dflt;
  const int base = a[1] && a[1]->is_int() ? static_cast<int>(a[1]->as_int()) : 10;
  std::string s = v.str();
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  const size_t b = s.find_first_not_of(" \t\n\r\f\v");
  const size_t e = s.find_last_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return dflt;
  s = s.substr(b, e - b + 1);
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(s.c_str(), &end, base);
  if (errno == 0 && end != s.c_str() && *end == '\0') return Value::Int(i);
  const double d = std::strtod(s.c_str(), &end);  // jinja2 also accepts "3.7" -> 3
  if (end != s.c_str() && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) {
    return Value::Int(static_cast<int64_t>(std::trunc(d)));
  }
  return dflt;
}

Result<Value> FloatFilter(Context&, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("float", args, {"default"}));
  const Value dflt = a[0] ? *a[0] : Value::Float(0.0);
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_number()) return Value::Float(v.as_double());
  if (!v.is_string()) return dflt;
  const std::string& s = v.str();
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return dflt;
  while (*end == ' ' || *end == '\n' || *end == '\t') ++end;
  return *end == '\0' ? Value::Float(d) : dflt;
}

Result<Value> Round(Context&, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("round", args, {"precision", "method"}));
  const int64_t precision = a[0] && a[0]->is_int() ? a[0]->as_int() : 0;
  const std::string method = a[1] && a[1]->is_string() ? a[1]->str() : "common";
  if (!v.is_number()) return InvalidArgument("round: value must be a number");
  if (v.is_int() && method == "common" && precision >= 0) return Value::Int(v.as_int());
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  double r;
  if (method == "common") {
    r = std::nearbyint(x);  // round half to even, as Python's round()
  } else if (method == "ceil") {
    r = std::ceil(x);
  } else if (method == "floor") {
    r = std::floor(x);
  } else {
    return InvalidArgument("method must be common, ceil or floor");
  }
  return Value::Float(r / scale);
}

Result<Value> Center(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("center", args, {"width"}));
  PAGODA_ASSIGN_OR_RETURN(Text t, ToText(v));
  Args m;
  m.positional.push_back(a[0] ? *a[0] : Value::Int(80));
  return CallMethod(ctx, Value::Str(std::move(t)), "center", m);
}

Result<Value> Format(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(Text t, ToText(v));
  if (!args.keyword.empty()) {
    std::vector<std::pair<Value, Value>> kw;
    for (const auto& [k, x] : args.keyword) kw.emplace_back(Value::Str(k), x);
    PAGODA_ASSIGN_OR_RETURN(Value mapping, MakeDict(std::move(kw)));
    return PercentFormat(ctx, Value::Str(std::move(t)), mapping);
  }
  PAGODA_ASSIGN_OR_RETURN(Value tuple, MakeList(args.positional, true));
  return PercentFormat(ctx, Value::Str(std::move(t)), tuple);
}

Result<Value> Escape(Context&, const Value& v, const Args&) {
  PAGODA_ASSIGN_OR_RETURN(Text t, ToText(v));
  std::string out;
  for (char c : t.str()) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value::Str(std::move(out), t.has_content());
}

Result<Value> Pprint(Context&, const Value& v, const Args&) {
  PAGODA_ASSIGN_OR_RETURN(std::string s, Repr(v));
  return Value::Str(std::move(s), HasContent(v));
}

Result<Value> Safe(Context&, const Value& v, const Args&) { return v; }

Result<Value> Attr(Context&, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("attr", args, {"name"}, 1));
  PAGODA_ASSIGN_OR_RETURN(Text name, ToText(*a[0]));
  // getattr() only: a dict's keys are not attributes.
  if (v.is(Type::kDict)) {
    PAGODA_ASSIGN_OR_RETURN(Value method, GetAttr(MakeDictValue(Dict()), name.str()));
    if (method.is(Type::kFunc)) return GetAttr(v, name.str());
    return Value::MakeUndefined("'dict object' has no attribute '" + name.str() + "'");
  }
  return GetAttr(v, name.str());
}

Result<Value> WordCount(Context&, const Value& v, const Args&) {
  PAGODA_ASSIGN_OR_RETURN(Text t, ToText(v));
  int64_t n = 0;
  bool in_word = false;
  const std::string& s = t.str();
  for (size_t i = 0; i < s.size();) {
    const char32_t c = DecodeUtf8(s, &i);
    const bool w = IsPyAlpha(c) || IsPyDigit(c) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::Int(n);
}

Result<Value> Truncate(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a,
                          BindArgs("truncate", args, {"length", "killwords", "end", "leeway"}));
  const int64_t length = a[0] && a[0]->is_int() ? a[0]->as_int() : 255;
  const bool killwords = a[1] && Truthy(*a[1]);
  const std::string end = a[2] && a[2]->is_string() ? a[2]->str() : "...";
  const int64_t leeway = a[3] && a[3]->is_int() ? a[3]->as_int() : 5;
  const int64_t end_len = static_cast<int64_t>(CountCodePoints(end));
  if (length < end_len) return InvalidArgument("expected length >= " + std::to_string(end_len));
  if (leeway < 0) return InvalidArgument("expected leeway >= 0");
  PAGODA_ASSIGN_OR_RETURN(Value len, Length(ctx, v, Args{}));  // len(s), as jinja2 does
  if (len.as_int() <= length + leeway) return v;
  if (!v.is_string()) return InvalidArgument("truncate: expected a string");
  const Text& t = v.text();
  const auto off = CodePointOffsets(t.str());
  std::string cut = t.str().substr(0, off[length - end_len]);
  if (!killwords) {
    const size_t sp = cut.rfind(' ');
    if (sp != std::string::npos) cut.resize(sp);
  }
  return Value::Str(cut + end, t.has_content());
}

Result<Value> Reverse(Context& ctx, const Value& v, const Args&) {
  if (v.is_string()) {
    return GetSlice(ctx, v, Value::NoneValue(), Value::NoneValue(), Value::Int(-1));
  }
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  std::reverse(items.begin(), items.end());
  return MakeList(std::move(items));
}

Result<Value> Batch(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("batch", args, {"linecount", "fill_with"}, 1));
  if (!a[0]->is_int() || a[0]->as_int() <= 0) return InvalidArgument("batch: linecount > 0");
  const size_t n = static_cast<size_t>(a[0]->as_int());
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  std::vector<Value> out;
  for (size_t i = 0; i < items.size(); i += n) {
    std::vector<Value> row(items.begin() + i, items.begin() + std::min(items.size(), i + n));
    if (a[1] && !a[1]->is_none()) {
      PAGODA_RETURN_IF_ERROR(ctx.CheckListSize(n));
      while (row.size() < n) row.push_back(*a[1]);
    }
    PAGODA_ASSIGN_OR_RETURN(Value r, MakeList(std::move(row)));
    out.push_back(std::move(r));
  }
  return MakeList(std::move(out));
}

using FilterFn = Result<Value> (*)(Context&, const Value&, const Args&);

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"length", Length},
    {"count", Length},
    {"default", Default},
    {"d", Default},
    {"string", StringFilter},
    {"trim", Trim},
    {"upper", CaseFilter<PyUpper>},
    {"lower", CaseFilter<PyLower>},
    {"capitalize", CaseFilter<PyCapitalize>},
    {"title", CaseFilter<JinjaTitle>},
    {"replace", Replace},
    {"items", Items},
    {"list", ListFilter},
    {"first", First},
    {"last", Last},
    {"join", Join},
    {"tojson", ToJson},
    {"indent", Indent},
    {"abs", Abs},
    {"int", IntFilter},
    {"float", FloatFilter},
    {"round", Round},
    {"center", Center},
    {"format", Format},
    {"escape", Escape},
    {"e", Escape},
    {"forceescape", Escape},
    {"pprint", Pprint},
    {"safe", Safe},
    {"attr", Attr},
    {"wordcount", WordCount},
    {"truncate", Truncate},
    {"reverse", Reverse},
    {"batch", Batch},
    {"select", Select},
    {"reject", Reject},
    {"selectattr", SelectAttr},
    {"rejectattr", RejectAttr},
    {"map", Map},
    {"sort", Sort},
    {"dictsort", DictSort},
    {"unique", Unique},
    {"min", Min},
    {"max", Max},
    {"sum", Sum},
    {"groupby", GroupBy},
};

const FilterEntry* FindFilter(std::string_view name) {
  for (const FilterEntry& f : kFilters) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace

bool IsFilter(std::string_view name) { return FindFilter(name) != nullptr; }

Result<Value> ApplyFilter(Context& ctx, std::string_view name, const Value& input,
                          const Args& args) {
  const FilterEntry* f = FindFilter(name);
  if (f == nullptr) return InvalidArgument("No filter named '" + std::string(name) + "'.");
  return f->fn(ctx, input, args);
}

}  // namespace pagoda::jinja
