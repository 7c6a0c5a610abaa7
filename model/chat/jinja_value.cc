#include "model/chat/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pagoda::jinja {
namespace {

Status NestingError() {
  return InvalidArgument("value nested more than " + std::to_string(kMaxNesting) + " levels deep");
}

bool EqualsAt(const Value& a, const Value& b, int depth);

bool SequencesEqual(const List& a, const List& b, int depth) {
  if (a.tuple != b.tuple || a.items.size() != b.items.size()) return false;
  for (size_t i = 0; i < a.items.size(); ++i) {
    if (!EqualsAt(a.items[i], b.items[i], depth + 1)) return false;
  }
  return true;
}

bool DictsEqual(const Dict& a, const Dict& b, int depth) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, v] : a.entries()) {
    const Value* other = b.Find(k);
    if (other == nullptr || !EqualsAt(v, *other, depth + 1)) return false;
  }
  return true;
}

bool EqualsAt(const Value& a, const Value& b, int depth) {
  if (depth > kMaxNesting) return false;
  if (a.is_number() && b.is_number()) {
    if (a.is(Value::Type::kFloat) || b.is(Value::Type::kFloat)) {
      return a.as_double() == b.as_double();
    }
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return true;
    case Value::Type::kString:
      return a.str() == b.str();
    case Value::Type::kList:
      return SequencesEqual(a.list(), b.list(), depth);
    case Value::Type::kDict:
      return DictsEqual(a.dict(), b.dict(), depth);
    case Value::Type::kObject:
      return &a.object() == &b.object();
    case Value::Type::kFunc:
      return &a.func() == &b.func();
    default:
      return false;
  }
}

bool HasContentAt(const Value& v, int depth) {
  if (depth > kMaxNesting) return true;  // unknown: the safe answer
  switch (v.type()) {
    case Value::Type::kString:
      return v.text().has_content();
    case Value::Type::kList:
      return std::any_of(v.list().items.begin(), v.list().items.end(),
                         [&](const Value& x) { return HasContentAt(x, depth + 1); });
    case Value::Type::kDict:
      for (const auto& [k, x] : v.dict().entries()) {
        if (HasContentAt(k, depth + 1) || HasContentAt(x, depth + 1)) return true;
      }
      return false;
    case Value::Type::kObject:
      for (const auto& [k, x] : v.object().attrs.entries()) {
        if (HasContentAt(x, depth + 1)) return true;
      }
      return false;
    default:
      return false;
  }
}

Result<std::string> HashKeyAt(const Value& v, int depth) {
  if (depth > kMaxNesting) return NestingError();
  switch (v.type()) {
    case Value::Type::kString:
      return "s" + v.str();
    case Value::Type::kBool:
    case Value::Type::kInt:
      return "i" + std::to_string(v.as_int());
    case Value::Type::kFloat: {
      const double d = v.as_double();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) {
        return "i" + std::to_string(static_cast<int64_t>(d));
      }
      char buf[40];
      std::snprintf(buf, sizeof(buf), "f%.17g", d);
      return std::string(buf);
    }
    case Value::Type::kNone:
      return std::string("n");
    case Value::Type::kUndefined:  // jinja2's Undefined hashes by type: all are one key
      return std::string("u");
    case Value::Type::kList:
      if (v.list().tuple) {
        std::string key = "t(";
        for (const Value& x : v.list().items) {
          PAGODA_ASSIGN_OR_RETURN(std::string k, HashKeyAt(x, depth + 1));
          key += std::to_string(k.size()) + ":" + k;
        }
        return key + ")";
      }
      [[fallthrough]];
    default:
      return InvalidArgument("unhashable type: '" + TypeName(v) + "'");
  }
}

}  // namespace

Value Value::Str(std::string s, bool content) {
  return Value(Variant(std::make_shared<const Text>(std::move(s), content)));
}

Value Value::Str(Text t) { return Value(Variant(std::make_shared<const Text>(std::move(t)))); }

int64_t Value::as_int() const {
  if (is(Type::kBool)) return std::get<bool>(v_) ? 1 : 0;
  return std::get<int64_t>(v_);
}

double Value::as_double() const {
  if (is(Type::kFloat)) return std::get<double>(v_);
  return static_cast<double>(as_int());
}

Status Dict::Set(Value key, Value value) {
  PAGODA_ASSIGN_OR_RETURN(std::string h, HashKey(key));
  auto [it, inserted] = index_.try_emplace(std::move(h), entries_.size());
  if (inserted) {
    entries_.emplace_back(std::move(key), std::move(value));
  } else {
    entries_[it->second].second = std::move(value);
  }
  return Status::Ok();
}

const Value* Dict::Find(const Value& key) const {
  auto h = HashKey(key);
  if (!h.ok()) return nullptr;
  auto it = index_.find(*h);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

const Value* Dict::Find(std::string_view key) const {
  std::string h = "s";
  h.append(key);
  auto it = index_.find(h);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

int DepthOf(const Value& v) {
  switch (v.type()) {
    case Value::Type::kList:
      return v.list().depth;
    case Value::Type::kDict:
      return v.dict().depth;
    case Value::Type::kObject:
      return v.object().depth;
    case Value::Type::kFunc:
      return v.func().depth;
    default:
      return 0;
  }
}

Result<Value> MakeList(std::vector<Value> items, bool tuple) {
  int depth = 0;
  for (const Value& v : items) depth = std::max(depth, DepthOf(v));
  if (depth + 1 > kMaxNesting) return NestingError();
  auto list = std::make_shared<List>();
  list->items = std::move(items);
  list->tuple = tuple;
  list->depth = depth + 1;
  return Value(Value::Variant(ListPtr(std::move(list))));
}

Result<Value> MakeDict(std::vector<std::pair<Value, Value>> entries) {
  Dict dict;
  int depth = 0;
  for (auto& [k, v] : entries) {
    depth = std::max({depth, DepthOf(k), DepthOf(v)});
    PAGODA_RETURN_IF_ERROR(dict.Set(std::move(k), std::move(v)));
  }
  if (depth + 1 > kMaxNesting) return NestingError();
  dict.depth = depth + 1;
  return MakeDictValue(std::move(dict));
}

Value MakeDictValue(Dict dict) {
  return Value(Value::Variant(DictPtr(std::make_shared<const Dict>(std::move(dict)))));
}

bool Truthy(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return false;
    case Value::Type::kBool:
    case Value::Type::kInt:
      return v.as_int() != 0;
    case Value::Type::kFloat:
      return v.as_double() != 0.0;
    case Value::Type::kString:
      return !v.str().empty();
    case Value::Type::kList:
      return !v.list().items.empty();
    case Value::Type::kDict:
      return v.dict().size() != 0;
    default:
      return true;
  }
}

std::string TypeName(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return "Undefined";
    case Value::Type::kNone:
      return "NoneType";
    case Value::Type::kBool:
      return "bool";
    case Value::Type::kInt:
      return "int";
    case Value::Type::kFloat:
      return "float";
    case Value::Type::kString:
      return "str";
    case Value::Type::kList:
      return v.list().tuple ? "tuple" : "list";
    case Value::Type::kDict:
      return "dict";
    case Value::Type::kObject:
      switch (v.object().kind) {
        case Object::Kind::kLoop:
          return "LoopContext";
        case Object::Kind::kJoiner:
          return "Joiner";
        default:
          return "Namespace";
      }
    case Value::Type::kFunc:
      return v.func().kind == Callable::Kind::kMacro ? "Macro" : "builtin_function_or_method";
  }
  return "object";
}

bool Equals(const Value& a, const Value& b) { return EqualsAt(a, b, 0); }

Result<int> Compare(const Value& a, const Value& b, std::string_view op) {
  if (a.is_number() && b.is_number()) {
    if (a.is(Value::Type::kFloat) || b.is(Value::Type::kFloat)) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);  // NaN compares "equal": every < / > is false
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is(Value::Type::kList) && b.is(Value::Type::kList) && a.list().tuple == b.list().tuple) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      if (Equals(x[i], y[i])) continue;
      return Compare(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  if (a.is_undefined() || b.is_undefined()) {
    return InvalidArgument(a.is_undefined() ? a.undefined_hint() : b.undefined_hint());
  }
  return InvalidArgument("'" + std::string(op) + "' not supported between instances of '" +
                         TypeName(a) + "' and '" + TypeName(b) + "'");
}

Result<std::string> HashKey(const Value& v) { return HashKeyAt(v, 0); }

bool HasContent(const Value& v) { return HasContentAt(v, 0); }

}  // namespace pagoda::jinja
