// Value: the dynamically typed value of the Jinja renderer, a variant over Python's types as
// Jinja sees them (undefined, None, bool, int, float, str, list/tuple, dict, namespace and loop
// objects, callables), plus truthiness, equality, ordering and dict keys with Python semantics.
//
// Lists, tuples and dicts are immutable once built (the sandbox is immutable), so they are
// shared by pointer; only a namespace() object changes (`set ns.x = ...`). Containers record
// their nesting depth and refuse to nest deeper than kMaxNesting, which bounds every recursive
// walk over values (repr, tojson, equality) and their destruction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"
#include "model/chat/jinja_text.h"

namespace pagoda::jinja {

inline constexpr int kMaxNesting = 128;

struct Scope;
struct MacroDef;
struct Stmt;
struct List;
class Dict;
struct Object;
struct Callable;

struct Undefined {
  std::string hint;  // why it is undefined: "'x' is undefined", "'dict object' has no ..."
};
struct None {};

using StrPtr = std::shared_ptr<const Text>;
using ListPtr = std::shared_ptr<const List>;
using DictPtr = std::shared_ptr<const Dict>;
using ObjectPtr = std::shared_ptr<Object>;
using CallablePtr = std::shared_ptr<const Callable>;

class Value {
 public:
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kObject, kFunc };
  using Variant = std::variant<Undefined, None, bool, int64_t, double, StrPtr, ListPtr, DictPtr,
                               ObjectPtr, CallablePtr>;

  Value() = default;
  Value(Variant v) : v_(std::move(v)) {}  // NOLINT: implicit by design
  static Value Str(std::string s, bool content = false);
  static Value Str(Text t);
  static Value MakeUndefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  static Value Bool(bool b) { return Value(Variant(b)); }
  static Value Int(int64_t i) { return Value(Variant(i)); }
  static Value Float(double d) { return Value(Variant(d)); }
  static Value NoneValue() { return Value(Variant(None{})); }

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is(Type t) const { return type() == t; }
  bool is_undefined() const { return is(Type::kUndefined); }
  bool is_none() const { return is(Type::kNone); }
  bool is_string() const { return is(Type::kString); }
  // int or bool (bool is an int in Python); is_number adds float.
  bool is_int() const { return is(Type::kInt) || is(Type::kBool); }
  bool is_number() const { return is_int() || is(Type::kFloat); }

  const std::string& str() const { return std::get<StrPtr>(v_)->str(); }
  const Text& text() const { return *std::get<StrPtr>(v_); }
  const List& list() const { return *std::get<ListPtr>(v_); }
  const Dict& dict() const { return *std::get<DictPtr>(v_); }
  Object& object() const { return *std::get<ObjectPtr>(v_); }
  const Callable& func() const { return *std::get<CallablePtr>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }
  int64_t as_int() const;    // int or bool
  double as_double() const;  // any number
  const Variant& variant() const { return v_; }

 private:
  Variant v_;
};

struct List {
  std::vector<Value> items;
  bool tuple = false;
  int depth = 1;
};

// An insertion-ordered dict keyed by hashable values (str, int, float, bool, None, tuples).
class Dict {
 public:
  // Inserts or replaces (a replaced key keeps its position, as in Python).
  Status Set(Value key, Value value);
  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  int depth = 1;

 private:
  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;
};

// namespace() objects (mutable attributes), a for loop's `loop` variable (read-only, its
// attributes computed from the position in `items`) and joiner() objects.
struct Object {
  enum class Kind { kNamespace, kLoop, kJoiner };
  Kind kind = Kind::kNamespace;
  Dict attrs;                                       // kNamespace
  Value separator;                                  // kJoiner: what calls after the first give
  bool used = false;                                // kJoiner: called before
  std::shared_ptr<const std::vector<Value>> items;  // kLoop: what the loop visits
  size_t index = 0;                                 // kLoop: loop.index0
  int depth = 1;       // kLoop: 1 + the deepest item; kJoiner: 1 + the separator's depth
  int loop_depth = 1;  // kLoop: loop.depth (recursive loops)
  const Stmt* loop_stmt = nullptr;  // kLoop of a `recursive` loop: loop(items)
  std::weak_ptr<Scope> loop_scope;  //   runs it again in this scope
};

struct Callable {
  enum class Kind {
    kGlobal,     // range, namespace, dict, raise_exception, strftime_now, ...
    kMethod,     // a str / dict / list method bound to `self`
    kMacro,      // a {% macro %} or the `caller` of a {% call %} block
    kLoopCycle,  // loop.cycle, `self` holds loop.index0
  };
  Kind kind = Kind::kGlobal;
  std::string name;
  Value self;
  const MacroDef* macro = nullptr;
  std::weak_ptr<Scope> closure;  // the scope the macro was defined in
  int depth = 1;                 // 1 + the depth of `self`
};

// Containers. Errors: the nesting limit, an unhashable dict key.
Result<Value> MakeList(std::vector<Value> items, bool tuple = false);
Result<Value> MakeDict(std::vector<std::pair<Value, Value>> entries);
Value MakeDictValue(Dict dict);  // dict.depth must be set
int DepthOf(const Value& v);

bool Truthy(const Value& v);
// Python's type name ("str", "int", "NoneType", "dict", ...).
std::string TypeName(const Value& v);
// Python ==, deep. Containers nested beyond kMaxNesting compare unequal.
bool Equals(const Value& a, const Value& b);
// Python ordering (<): numbers, strings, lists / tuples. Errors name the two types.
Result<int> Compare(const Value& a, const Value& b, std::string_view op);
// The canonical hash key of a dict key (1, 1.0 and True are the same key). Errors: unhashable.
Result<std::string> HashKey(const Value& v);
// Whether any string reachable from `v` (dict keys included) holds content bytes.
bool HasContent(const Value& v);

}  // namespace pagoda::jinja
