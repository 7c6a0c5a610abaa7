// The globals of Hugging Face's environment: jinja2's range / dict / namespace, and
// transformers' raise_exception and strftime_now.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "model/chat/jinja_builtins.h"
#include "model/chat/jinja_repr.h"
#include "model/chat/jinja_strftime.h"

namespace pagoda::jinja {
namespace {

constexpr std::string_view kGlobals[] = {"range",           "dict",         "namespace",
                                         "raise_exception", "strftime_now", "joiner"};

Result<Value> Range(Context& ctx, const Args& args) {
  if (!args.keyword.empty()) return InvalidArgument("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) return InvalidArgument("range expected 1 to 3 arguments");
  for (const Value& v : p) {
    if (!v.is_int()) {
      return InvalidArgument("'" + TypeName(v) + "' object cannot be interpreted as an integer");
    }
  }
  const int64_t start = p.size() >= 2 ? p[0].as_int() : 0;
  const int64_t stop = p.size() >= 2 ? p[1].as_int() : p[0].as_int();
  const int64_t step = p.size() == 3 ? p[2].as_int() : 1;
  if (step == 0) return InvalidArgument("range() arg 3 must not be zero");
  const __int128 lo = start, hi = stop;
  __int128 len = 0;
  if (step > 0 && lo < hi) len = (hi - lo - 1) / step + 1;
  if (step < 0 && lo > hi) len = (lo - hi - 1) / -static_cast<__int128>(step) + 1;
  PAGODA_RETURN_IF_ERROR(
      ctx.CheckListSize(static_cast<uint64_t>(std::min<__int128>(len, UINT64_MAX))));
  const uint64_t n = static_cast<uint64_t>(len);
  PAGODA_RETURN_IF_ERROR(ctx.Work(n));
  PAGODA_RETURN_IF_ERROR(ctx.CheckListSize(n));
  std::vector<Value> items;
  items.reserve(n);
  for (uint64_t i = 0; i < n; ++i)
    items.push_back(Value::Int(start + static_cast<int64_t>(i) * step));
  return MakeList(std::move(items));
}

// The entries of dict(...) / namespace(...): an optional mapping (or list of pairs), then
// keyword arguments.
Result<std::vector<std::pair<Value, Value>>> Entries(std::string_view fn, const Args& args) {
  if (args.positional.size() > 1) {
    return InvalidArgument(std::string(fn) + " expected at most 1 positional argument");
  }
  std::vector<std::pair<Value, Value>> entries;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is(Value::Type::kDict)) {
      entries = src.dict().entries();
    } else if (src.is(Value::Type::kList)) {
      for (const Value& pair : src.list().items) {
        if (!pair.is(Value::Type::kList) || pair.list().items.size() != 2) {
          return InvalidArgument(std::string(fn) + ": sequence elements must be pairs");
        }
        entries.emplace_back(pair.list().items[0], pair.list().items[1]);
      }
    } else {
      return InvalidArgument("'" + TypeName(src) + "' object is not iterable");
    }
  }
  for (const auto& [k, v] : args.keyword) entries.emplace_back(Value::Str(k), v);
  return entries;
}

Result<Value> Namespace(Context& ctx, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto entries, Entries("namespace", args));
  PAGODA_RETURN_IF_ERROR(ctx.Work(entries.size() * kDictEntryWork));
  ObjectPtr ns = ctx.NewObject(Object::Kind::kNamespace);
  for (auto& [k, v] : entries) {
    if (!k.is_string()) return InvalidArgument("namespace keys must be strings");
    PAGODA_RETURN_IF_ERROR(ns->attrs.Set(std::move(k), std::move(v)));
  }
  return Value(Value::Variant(std::move(ns)));
}

Result<Value> RaiseException(const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("raise_exception", args, {"message"}));
  std::string message;
  if (a[0]) {
    PAGODA_ASSIGN_OR_RETURN(Text t, ToText(*a[0]));
    message = t.str();
  }
  return Status(StatusCode::kAborted, message);
}

Result<Value> StrftimeNow(Context& ctx, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("strftime_now", args, {"format"}, 1));
  if (!a[0]->is_string()) return InvalidArgument("strftime_now: format must be a string");
  PAGODA_ASSIGN_OR_RETURN(std::string s, Strftime(ctx.now(), a[0]->str()));
  return Value::Str(std::move(s), a[0]->text().has_content());
}

}  // namespace

bool IsGlobal(std::string_view name) {
  for (std::string_view g : kGlobals) {
    if (g == name) return true;
  }
  return false;
}

Result<Value> CallGlobal(Context& ctx, std::string_view name, const Args& args) {
  PAGODA_RETURN_IF_ERROR(ctx.Step());
  if (name == "range") return Range(ctx, args);
  if (name == "dict") {
    PAGODA_ASSIGN_OR_RETURN(auto entries, Entries("dict", args));
    PAGODA_RETURN_IF_ERROR(ctx.Work(entries.size() * kDictEntryWork));
    return MakeDict(std::move(entries));
  }
  if (name == "namespace") return Namespace(ctx, args);
  if (name == "raise_exception") return RaiseException(args);
  if (name == "strftime_now") return StrftimeNow(ctx, args);
  if (name == "joiner") {  // "" on its first call, then the separator
    PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("joiner", args, {"sep"}));
    auto j = std::make_shared<Object>();
    j->kind = Object::Kind::kJoiner;
    j->separator = a[0] ? *a[0] : Value::Str(", ");
    j->depth = DepthOf(j->separator) + 1;
    if (j->depth > kMaxNesting) return InvalidArgument("joiner separator nested too deeply");
    return Value(Value::Variant(ObjectPtr(std::move(j))));
  }
  return InvalidArgument("'" + std::string(name) + "' is undefined");
}

}  // namespace pagoda::jinja
