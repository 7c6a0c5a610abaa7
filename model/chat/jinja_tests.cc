// jinja2's tests (`x is defined`, `x is equalto y`, ...).
#include <cmath>
#include <iterator>

#include "model/chat/jinja_access.h"
#include "model/chat/jinja_builtins.h"
#include "model/chat/jinja_operators.h"
#include "model/chat/jinja_repr.h"
#include "model/chat/jinja_unicode.h"

namespace pagoda::jinja {
namespace {

using Type = Value::Type;
using TestFn = Result<bool> (*)(Context&, const Value&, const Args&);

Result<Value> OneArg(std::string_view test, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto bound, BindArgs(test, args, {"other"}, 1));
  return *bound[0];
}

template <bool (*Pred)(const Value&)>
Result<bool> Simple(Context&, const Value& v, const Args& args) {
  PAGODA_RETURN_IF_ERROR(BindArgs("test", args, {}).status());
  return Pred(v);
}

bool IsDefined(const Value& v) { return !v.is_undefined(); }
bool IsUndefined(const Value& v) { return v.is_undefined(); }
bool IsNone(const Value& v) { return v.is_none(); }
bool IsBoolean(const Value& v) { return v.is(Type::kBool); }
bool IsFalse(const Value& v) { return v.is(Type::kBool) && !v.as_int(); }
bool IsTrue(const Value& v) { return v.is(Type::kBool) && v.as_int(); }
bool IsInteger(const Value& v) { return v.is(Type::kInt); }
bool IsFloat(const Value& v) { return v.is(Type::kFloat); }
bool IsNumber(const Value& v) { return v.is_number(); }
bool IsString(const Value& v) { return v.is_string(); }
bool IsMapping(const Value& v) { return v.is(Type::kDict); }
bool IsIterable(const Value& v) {
  return v.is_undefined() || v.is_string() || v.is(Type::kList) || v.is(Type::kDict);
}
// An Undefined is callable in jinja2 (calling it fails).
bool IsCallable(const Value& v) {
  return v.is(Type::kFunc) || v.is_undefined() ||
         (v.is(Type::kObject) && v.object().kind != Object::Kind::kNamespace);
}
bool IsEscaped(const Value&) { return false; }

// str(value).islower() / isupper(), as jinja2's tests do.
bool AllChars(const Value& v, bool (*pred)(char32_t), bool (*other_cased)(char32_t)) {
  auto text = ToText(v);
  if (!text.ok()) return false;
  const std::string& s = text->str();
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t c = DecodeUtf8(s, &i);
    if (other_cased(c)) return false;
    cased = cased || pred(c);
  }
  return cased;
}
bool IsLowerStr(const Value& v) { return AllChars(v, IsPyLower, IsPyUpper); }
bool IsUpperStr(const Value& v) { return AllChars(v, IsPyUpper, IsPyLower); }

Result<bool> Parity(const Value& v, int want) {
  if (!v.is_number()) return InvalidArgument("'" + TypeName(v) + "' is not a number");
  if (v.is_int()) return ((v.as_int() % 2) + 2) % 2 == want;
  return std::fmod(std::fabs(v.as_double()), 2.0) == want;
}
Result<bool> Odd(Context&, const Value& v, const Args& args) {
  PAGODA_RETURN_IF_ERROR(BindArgs("odd", args, {}).status());
  return Parity(v, 1);
}
Result<bool> Even(Context&, const Value& v, const Args& args) {
  PAGODA_RETURN_IF_ERROR(BindArgs("even", args, {}).status());
  return Parity(v, 0);
}

Result<bool> DivisibleBy(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(Value n, OneArg("divisibleby", args));
  PAGODA_ASSIGN_OR_RETURN(Value rem, BinaryOp(ctx, "%", v, n));
  return !Truthy(rem);
}

Result<bool> Sequence(Context&, const Value& v, const Args& args) {
  PAGODA_RETURN_IF_ERROR(BindArgs("sequence", args, {}).status());
  return v.is_undefined() || v.is_string() || v.is(Type::kList) || v.is(Type::kDict);
}

Result<bool> SameAs(Context&, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(Value other, OneArg("sameas", args));
  if (v.type() != other.type()) return false;
  switch (v.type()) {
    case Type::kList:
      return &v.list() == &other.list();
    case Type::kDict:
      return &v.dict() == &other.dict();
    default:
      return Equals(v, other);
  }
}

template <const char* Op>
Result<bool> Cmp(Context&, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(Value other, OneArg(Op, args));
  return CompareOp(Op, v, other);
}

Result<bool> InTest(Context&, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(Value seq, OneArg("in", args));
  return Contains(seq, v);
}

Result<bool> FilterTest(Context&, const Value& v, const Args&) {
  return v.is_string() && IsFilter(v.str());
}
Result<bool> TestTest(Context&, const Value& v, const Args&) {
  return v.is_string() && IsTest(v.str());
}

constexpr char kEq[] = "==", kNe[] = "!=", kGt[] = ">", kGe[] = ">=", kLt[] = "<", kLe[] = "<=";

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"defined", Simple<IsDefined>},
    {"undefined", Simple<IsUndefined>},
    {"none", Simple<IsNone>},
    {"boolean", Simple<IsBoolean>},
    {"false", Simple<IsFalse>},
    {"true", Simple<IsTrue>},
    {"integer", Simple<IsInteger>},
    {"float", Simple<IsFloat>},
    {"number", Simple<IsNumber>},
    {"string", Simple<IsString>},
    {"mapping", Simple<IsMapping>},
    {"iterable", Simple<IsIterable>},
    {"sequence", Sequence},
    {"callable", Simple<IsCallable>},
    {"escaped", Simple<IsEscaped>},
    {"lower", Simple<IsLowerStr>},
    {"upper", Simple<IsUpperStr>},
    {"odd", Odd},
    {"even", Even},
    {"divisibleby", DivisibleBy},
    {"sameas", SameAs},
    {"in", InTest},
    {"filter", FilterTest},
    {"test", TestTest},
    {"eq", Cmp<kEq>},
    {"equalto", Cmp<kEq>},
    {"==", Cmp<kEq>},
    {"ne", Cmp<kNe>},
    {"!=", Cmp<kNe>},
    {"gt", Cmp<kGt>},
    {"greaterthan", Cmp<kGt>},
    {">", Cmp<kGt>},
    {"ge", Cmp<kGe>},
    {">=", Cmp<kGe>},
    {"lt", Cmp<kLt>},
    {"lessthan", Cmp<kLt>},
    {"<", Cmp<kLt>},
    {"le", Cmp<kLe>},
    {"<=", Cmp<kLe>},
};

const TestEntry* FindTest(std::string_view name) {
  for (const TestEntry& t : kTests) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace

bool IsTest(std::string_view name) { return FindTest(name) != nullptr; }

Result<bool> ApplyTest(Context& ctx, std::string_view name, const Value& v, const Args& args) {
  const TestEntry* t = FindTest(name);
  if (t == nullptr) return InvalidArgument("No test named '" + std::string(name) + "'.");
  auto r = t->fn(ctx, v, args);
  if (!r.ok() && r.status().code() == StatusCode::kInvalidArgument) {
    return r.status().WithPrefix("test '" + std::string(name) + "'");
  }
  return r;
}

}  // namespace pagoda::jinja
