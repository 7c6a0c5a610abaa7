#include "model/chat/jinja_access.h"

#include <algorithm>
#include <iterator>

#include "model/chat/jinja_unicode.h"

namespace pagoda::jinja {
namespace {

constexpr std::string_view kStrMethods[] = {
    "capitalize", "center",     "count",      "endswith",     "find",         "format",
    "index",      "isalnum",    "isalpha",    "isdigit",      "isnumeric",    "isdecimal",
    "islower",    "isspace",    "istitle",    "isupper",      "join",         "ljust",
    "lower",      "lstrip",     "partition",  "removeprefix", "removesuffix", "replace",
    "rfind",      "rindex",     "rjust",      "rpartition",   "rsplit",       "rstrip",
    "split",      "splitlines", "startswith", "strip",        "swapcase",     "title",
    "upper",      "zfill",      "casefold",   "expandtabs",   "isidentifier", "isprintable",
    "isascii",    "encode",     "format_map", "translate"};
constexpr std::string_view kDictMethods[] = {"get", "items", "keys", "values", "copy"};
constexpr std::string_view kDictUnsafe[] = {"clear",      "pop",    "popitem",
                                            "setdefault", "update", "fromkeys"};
constexpr std::string_view kListMethods[] = {"count", "index", "copy"};
constexpr std::string_view kListUnsafe[] = {"append", "clear",  "extend",  "insert",
                                            "pop",    "remove", "reverse", "sort"};

template <size_t N>
bool In(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

Result<Value> Method(const Value& self, std::string_view name) {
  auto f = std::make_shared<Callable>();
  f->kind = Callable::Kind::kMethod;
  f->name = std::string(name);
  f->self = self;
  f->depth = DepthOf(self) + 1;
  if (f->depth > kMaxNesting) return InvalidArgument("value nested too deeply");
  return Value(Value::Variant(CallablePtr(std::move(f))));
}

Value NoAttribute(const Value& obj, std::string_view name) {
  return Value::MakeUndefined("'" + TypeName(obj) + " object' has no attribute '" +
                              std::string(name) + "'");
}

Value Unsafe(const Value& obj, std::string_view name) {
  return Value::MakeUndefined("access to attribute '" + std::string(name) + "' of '" +
                              TypeName(obj) + "' object is unsafe.");
}

// Python's slice.indices(): start, stop for a sequence of `len`, clamped as CPython does.
void AdjustSlice(int64_t len, int64_t step, std::optional<int64_t> start_in,
                 std::optional<int64_t> stop_in, int64_t* start, int64_t* stop) {
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) -> int64_t {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= len) {
      x = step < 0 ? len - 1 : len;
    }
    return x;
  };
  *start = clamp(start_in, step < 0 ? len - 1 : 0);
  *stop = clamp(stop_in, step < 0 ? -1 : len);
}

Result<std::optional<int64_t>> SliceBound(const Value& v) {
  if (v.is_none() || v.is_undefined()) return std::optional<int64_t>();
  if (!v.is_int()) {
    return InvalidArgument("slice indices must be integers or None or have an __index__ method");
  }
  return std::optional<int64_t>(v.as_int());
}

// loop.index, loop.first, ... of a for loop's `loop` object.
Value LoopAttr(const Value& loop, std::string_view name) {
  const Object& o = loop.object();
  const int64_t n = static_cast<int64_t>(o.items->size());
  const int64_t i = static_cast<int64_t>(o.index);
  if (name == "index") return Value::Int(i + 1);
  if (name == "index0") return Value::Int(i);
  if (name == "revindex") return Value::Int(n - i);
  if (name == "revindex0") return Value::Int(n - i - 1);
  if (name == "first") return Value::Bool(i == 0);
  if (name == "last") return Value::Bool(i == n - 1);
  if (name == "length") return Value::Int(n);
  if (name == "depth") return Value::Int(o.loop_depth);
  if (name == "depth0") return Value::Int(o.loop_depth - 1);
  if (name == "previtem" && i > 0) return (*o.items)[i - 1];
  if (name == "nextitem" && i + 1 < n) return (*o.items)[i + 1];
  if (name == "cycle") {
    auto f = std::make_shared<Callable>();
    f->kind = Callable::Kind::kLoopCycle;
    f->name = "cycle";
    f->self = Value::Int(i);
    return Value(Value::Variant(CallablePtr(std::move(f))));
  }
  if (name == "previtem" || name == "nextitem") {
    return Value::MakeUndefined("there is no " +
                                std::string(name == "previtem" ? "previous" : "next") + " item");
  }
  return NoAttribute(loop, name);
}

}  // namespace

Status UndefinedError(const Value& undefined) {
  const std::string& hint = undefined.undefined_hint();
  return InvalidArgument(hint.empty() ? "value is undefined" : hint);
}

std::vector<Value> Characters(const Text& t) {
  const std::vector<size_t> off = CodePointOffsets(t.str());
  std::vector<Value> out;
  out.reserve(off.size() - 1);
  for (size_t i = 0; i + 1 < off.size(); ++i) out.push_back(Value::Str(t.Sub(off[i], off[i + 1])));
  return out;
}

Result<Value> GetAttr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (!name.empty() && name[0] == '_') return Unsafe(obj, name);
  switch (obj.type()) {
    case Value::Type::kString:
      if (In(kStrMethods, name)) return Method(obj, name);
      return NoAttribute(obj, name);
    case Value::Type::kDict: {
      if (In(kDictMethods, name)) return Method(obj, name);
      if (In(kDictUnsafe, name)) return Unsafe(obj, name);
      if (const Value* v = obj.dict().Find(name)) return *v;
      return NoAttribute(obj, name);
    }
    case Value::Type::kList:
      if (In(kListMethods, name)) return Method(obj, name);
      if (In(kListUnsafe, name)) return Unsafe(obj, name);
      return NoAttribute(obj, name);
    case Value::Type::kObject: {
      if (obj.object().kind == Object::Kind::kLoop) return LoopAttr(obj, name);
      if (const Value* v = obj.object().attrs.Find(name)) return *v;
      return NoAttribute(obj, name);
    }
    default:
      return NoAttribute(obj, name);
  }
}

Result<Value> GetItem(Context& ctx, const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedError(obj);
  switch (obj.type()) {
    case Value::Type::kDict:
      if (const Value* v = obj.dict().Find(key)) return *v;
      break;
    case Value::Type::kList:
    case Value::Type::kString: {
      if (!key.is_int()) break;
      int64_t i = key.as_int();
      if (obj.is(Value::Type::kList)) {
        const auto& items = obj.list().items;
        if (i < 0) i += static_cast<int64_t>(items.size());
        if (i >= 0 && i < static_cast<int64_t>(items.size())) return items[i];
      } else {
        const std::string& s = obj.str();
        PAGODA_RETURN_IF_ERROR(ctx.Built(s.size()));  // a linear scan
        if (i < 0) i += static_cast<int64_t>(CountCodePoints(s));
        const size_t b = i < 0 ? s.size() : CodePointToByte(s, static_cast<size_t>(i));
        if (b < s.size()) return Value::Str(obj.text().Sub(b, CodePointToByte(s, 1, b)));
      }
      return Value::MakeUndefined("'" + TypeName(obj) + " object' has no element " +
                                  std::to_string(key.as_int()));
    }
    default:
      break;
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::MakeUndefined("'" + TypeName(obj) + " object' has no element " +
                              (key.is_int() ? std::to_string(key.as_int()) : TypeName(key)));
}

Result<Value> GetSlice(Context& ctx, const Value& obj, const Value& start, const Value& stop,
                       const Value& step) {
  if (obj.is_undefined()) return UndefinedError(obj);
  PAGODA_ASSIGN_OR_RETURN(auto b0, SliceBound(start));
  PAGODA_ASSIGN_OR_RETURN(auto b1, SliceBound(stop));
  PAGODA_ASSIGN_OR_RETURN(auto b2, SliceBound(step));
  const int64_t s = b2.value_or(1);
  if (s == 0) return InvalidArgument("slice step cannot be zero");
  const bool is_list = obj.is(Value::Type::kList);
  if (obj.is(Value::Type::kDict)) return InvalidArgument("unhashable type: 'slice'");
  if (!is_list && !obj.is_string()) {
    return InvalidArgument("'" + TypeName(obj) + "' object is not subscriptable");
  }
  const int64_t len = is_list ? static_cast<int64_t>(obj.list().items.size())
                              : static_cast<int64_t>(CountCodePoints(obj.str()));
  int64_t lo = 0, hi = 0;
  AdjustSlice(len, s, b0, b1, &lo, &hi);
  PAGODA_RETURN_IF_ERROR(ctx.Built(is_list ? 0 : obj.str().size()));
  if (!is_list && s == 1) {  // the common case, without an offset table
    const size_t b = CodePointToByte(obj.str(), static_cast<size_t>(lo));
    const size_t e = CodePointToByte(obj.str(), static_cast<size_t>(std::max(lo, hi) - lo), b);
    return Value::Str(obj.text().Sub(b, e));
  }
  std::vector<size_t> off;
  if (!is_list) {
    PAGODA_RETURN_IF_ERROR(ctx.CheckListSize(static_cast<uint64_t>(len)));
    off = CodePointOffsets(obj.str());
  }
  std::vector<Value> items;
  Text text;
  for (int64_t i = lo; s > 0 ? i < hi : i > hi; i += s) {
    if (is_list) {
      items.push_back(obj.list().items[i]);
    } else {
      text.Append(obj.text().Sub(off[i], off[i + 1]));
    }
  }
  if (!is_list) return Value::Str(std::move(text));
  return MakeList(std::move(items), obj.list().tuple);
}

Result<std::vector<Value>> Iterate(Context& ctx, const Value& v) {
  if (v.is(Value::Type::kList)) PAGODA_RETURN_IF_ERROR(ctx.Work(v.list().items.size()));
  if (v.is(Value::Type::kDict)) PAGODA_RETURN_IF_ERROR(ctx.Work(v.dict().size()));
  switch (v.type()) {
    case Value::Type::kUndefined:
      return std::vector<Value>();
    case Value::Type::kList:
      return v.list().items;
    case Value::Type::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().size());
      for (const auto& [k, x] : v.dict().entries()) keys.push_back(k);
      return keys;
    }
    case Value::Type::kString:
      PAGODA_RETURN_IF_ERROR(ctx.Built(v.str().size()));
      PAGODA_RETURN_IF_ERROR(ctx.CheckListSize(CountCodePoints(v.str())));
      return Characters(v.text());
    default:
      return InvalidArgument("'" + TypeName(v) + "' object is not iterable");
  }
}

Result<bool> Contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::kUndefined:
      return false;
    case Value::Type::kString:
      if (!item.is_string()) {
        return InvalidArgument("'in <string>' requires string as left operand, not " +
                               TypeName(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Type::kList:
      return std::any_of(container.list().items.begin(), container.list().items.end(),
                         [&](const Value& x) { return Equals(x, item); });
    case Value::Type::kDict: {
      PAGODA_RETURN_IF_ERROR(HashKey(item).status());
      return container.dict().Find(item) != nullptr;
    }
    default:
      return InvalidArgument("argument of type '" + TypeName(container) + "' is not iterable");
  }
}

}  // namespace pagoda::jinja
