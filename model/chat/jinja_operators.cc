#include "model/chat/jinja_operators.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "model/chat/jinja_access.h"
#include "model/chat/jinja_format.h"
#include "model/chat/jinja_repr.h"

namespace pagoda::jinja {
namespace {

Status Unsupported(std::string_view op, const Value& a, const Value& b) {
  return InvalidArgument("unsupported operand type(s) for " + std::string(op) + ": '" +
                         TypeName(a) + "' and '" + TypeName(b) + "'");
}

Status Overflow() { return InvalidArgument("integer result too large (64-bit overflow)"); }

double PyFloorMod(double a, double b) {
  double m = std::fmod(a, b);
  if (m == 0) return std::copysign(0.0, b);
  if ((m < 0) != (b < 0)) m += b;
  return m;
}

Result<Value> IntPow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 0) return InvalidArgument("0.0 cannot be raised to a negative power");
    return Value::Float(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  int64_t result = 1;
  for (int64_t i = 0; i < exp; ++i) {
    if (__builtin_mul_overflow(result, base, &result)) return Overflow();
    if (result == 0 || result == 1) break;
    if (result == -1) return Value::Int((exp - i - 1) % 2 == 0 ? -1 : 1);
  }
  return Value::Int(result);
}

Result<Value> IntArith(std::string_view op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op == "+")
    return __builtin_add_overflow(x, y, &r) ? Result<Value>(Overflow()) : Value::Int(r);
  if (op == "-")
    return __builtin_sub_overflow(x, y, &r) ? Result<Value>(Overflow()) : Value::Int(r);
  if (op == "*")
    return __builtin_mul_overflow(x, y, &r) ? Result<Value>(Overflow()) : Value::Int(r);
  if (op == "/") {
    if (y == 0) return InvalidArgument("division by zero");
    return Value::Float(static_cast<double>(x) / static_cast<double>(y));
  }
  if (op == "//" || op == "%") {
    if (y == 0) return InvalidArgument("integer division or modulo by zero");
    if (x == std::numeric_limits<int64_t>::min() && y == -1) {
      return op == "%" ? Value::Int(0) : Result<Value>(Overflow());
    }
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;
    return Value::Int(op == "//" ? q : m);
  }
  return IntPow(x, y);  // "**"
}

Result<Value> FloatArith(std::string_view op, double x, double y) {
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "/") {
    if (y == 0) return InvalidArgument("float division by zero");
    return Value::Float(x / y);
  }
  if (op == "//") {
    if (y == 0) return InvalidArgument("float floor division by zero");
    const double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1.0;
    if (div == 0) return Value::Float(std::copysign(0.0, x / y));
    double floor_div = std::floor(div);
    if (div - floor_div > 0.5) floor_div += 1.0;
    return Value::Float(floor_div);
  }
  if (op == "%") {
    if (y == 0) return InvalidArgument("float modulo");
    return Value::Float(PyFloorMod(x, y));
  }
  if (x == 0 && y < 0) return InvalidArgument("0.0 cannot be raised to a negative power");
  return Value::Float(std::pow(x, y));
}

Result<Value> Repeat(Context& ctx, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    PAGODA_RETURN_IF_ERROR(ctx.CheckStringSize(static_cast<uint64_t>(seq.str().size()) * n));
    Text out;
    for (int64_t i = 0; i < n; ++i) out.Append(seq.text());
    PAGODA_RETURN_IF_ERROR(ctx.Built(out.size()));
    return Value::Str(std::move(out));
  }
  const auto& items = seq.list().items;
  PAGODA_RETURN_IF_ERROR(ctx.CheckListSize(static_cast<uint64_t>(items.size()) * n));
  PAGODA_RETURN_IF_ERROR(ctx.Work(static_cast<uint64_t>(items.size()) * n));
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return MakeList(std::move(out), seq.list().tuple);
}

Result<Value> Concat(Context& ctx, const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) {
    PAGODA_RETURN_IF_ERROR(ctx.Built(a.str().size() + b.str().size()));
    Text out = a.text();
    out.Append(b.text());
    return Value::Str(std::move(out));
  }
  if (a.is(Value::Type::kList) && b.is(Value::Type::kList) && a.list().tuple == b.list().tuple) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    PAGODA_RETURN_IF_ERROR(ctx.CheckListSize(x.size() + y.size()));
    PAGODA_RETURN_IF_ERROR(ctx.Work(x.size() + y.size()));
    std::vector<Value> out(x);
    out.insert(out.end(), y.begin(), y.end());
    return MakeList(std::move(out), a.list().tuple);
  }
  if (a.is_string() || a.is(Value::Type::kList)) {
    const std::string t = a.is_string() ? "str" : TypeName(a);
    return InvalidArgument("can only concatenate " + t + " (not \"" + TypeName(b) + "\") to " + t);
  }
  return Unsupported("+", a, b);
}

}  // namespace

Result<Value> BinaryOp(Context& ctx, std::string_view op, const Value& a, const Value& b) {
  if (op == "~") {
    PAGODA_ASSIGN_OR_RETURN(Text x, ToText(a));
    PAGODA_ASSIGN_OR_RETURN(Text y, ToText(b));
    PAGODA_RETURN_IF_ERROR(ctx.Built(x.size() + y.size()));
    x.Append(y);
    return Value::Str(std::move(x));
  }
  if (op == "%" && a.is_string()) return PercentFormat(ctx, a, b);
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return IntArith(op, a.as_int(), b.as_int());
    return FloatArith(op, a.as_double(), b.as_double());
  }
  if (op == "+") return Concat(ctx, a, b);
  if (op == "*") {
    if ((a.is_string() || a.is(Value::Type::kList)) && b.is_int())
      return Repeat(ctx, a, b.as_int());
    if ((b.is_string() || b.is(Value::Type::kList)) && a.is_int())
      return Repeat(ctx, b, a.as_int());
  }
  return Unsupported(op, a, b);
}

Result<Value> UnaryOp(std::string_view op, const Value& v) {
  if (op == "not") return Value::Bool(!Truthy(v));
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_number()) {
    return InvalidArgument("bad operand type for unary " + std::string(op) + ": '" + TypeName(v) +
                           "'");
  }
  if (op == "+") return v.is_int() ? Value::Int(v.as_int()) : v;
  if (v.is(Value::Type::kFloat)) return Value::Float(-v.as_double());
  if (v.as_int() == std::numeric_limits<int64_t>::min()) return Overflow();
  return Value::Int(-v.as_int());
}

Result<bool> CompareOp(std::string_view op, const Value& a, const Value& b) {
  if (op == "==") return Equals(a, b);
  if (op == "!=") return !Equals(a, b);
  if (op == "in") return Contains(b, a);
  if (op == "not in") {
    PAGODA_ASSIGN_OR_RETURN(bool in, Contains(b, a));
    return !in;
  }
  PAGODA_ASSIGN_OR_RETURN(int c, Compare(a, b, op));
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;  // ">="
}

}  // namespace pagoda::jinja
