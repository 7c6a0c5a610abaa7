#include "model/chat/jinja_repr.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "model/chat/jinja_unicode.h"

namespace pagoda::jinja {
namespace {

Status ReprDepthError() {
  return InvalidArgument("value nested more than " + std::to_string(kMaxNesting) +
                         " levels deep (a namespace that contains itself?)");
}

void AppendEscape(std::string* out, char32_t c) {
  char buf[16];
  if (c < 0x100) {
    std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
  } else if (c < 0x10000) {
    std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
  } else {
    std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
  }
  *out += buf;
}

Status ReprAt(const Value& v, int depth, std::string* out);

Status ReprItems(const std::vector<Value>& items, int depth, std::string* out) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) *out += ", ";
    PAGODA_RETURN_IF_ERROR(ReprAt(items[i], depth + 1, out));
  }
  return Status::Ok();
}

Status ReprDict(const Dict& d, int depth, std::string* out) {
  *out += "{";
  bool first = true;
  for (const auto& [k, x] : d.entries()) {
    if (!first) *out += ", ";
    first = false;
    PAGODA_RETURN_IF_ERROR(ReprAt(k, depth + 1, out));
    *out += ": ";
    PAGODA_RETURN_IF_ERROR(ReprAt(x, depth + 1, out));
  }
  *out += "}";
  return Status::Ok();
}

Status ReprObject(const Object& o, int depth, std::string* out) {
  if (o.kind == Object::Kind::kJoiner) {
    *out += "<Joiner>";
    return Status::Ok();
  }
  if (o.kind == Object::Kind::kLoop) {
    *out +=
        "<LoopContext " + std::to_string(o.index + 1) + "/" + std::to_string(o.items->size()) + ">";
    return Status::Ok();
  }
  *out += "<Namespace ";
  PAGODA_RETURN_IF_ERROR(ReprDict(o.attrs, depth, out));
  *out += ">";
  return Status::Ok();
}

void ReprFunc(const Callable& f, std::string* out) {
  switch (f.kind) {
    case Callable::Kind::kMacro:
      *out += "<Macro '" + f.name + "'>";
      return;
    case Callable::Kind::kMethod:
      *out += "<built-in method " + f.name + " of " + TypeName(f.self) + " object>";
      return;
    default:
      *out += "<function " + f.name + ">";
      return;
  }
}

Status ReprAt(const Value& v, int depth, std::string* out) {
  if (depth > kMaxNesting + 1) return ReprDepthError();
  switch (v.type()) {
    case Value::Type::kUndefined:
      *out += "Undefined";
      return Status::Ok();
    case Value::Type::kNone:
      *out += "None";
      return Status::Ok();
    case Value::Type::kBool:
      *out += v.as_int() ? "True" : "False";
      return Status::Ok();
    case Value::Type::kInt:
      *out += std::to_string(v.as_int());
      return Status::Ok();
    case Value::Type::kFloat:
      *out += FloatRepr(v.as_double());
      return Status::Ok();
    case Value::Type::kString:
      *out += StrRepr(v.str());
      return Status::Ok();
    case Value::Type::kList: {
      const List& l = v.list();
      *out += l.tuple ? "(" : "[";
      PAGODA_RETURN_IF_ERROR(ReprItems(l.items, depth, out));
      *out += l.tuple ? (l.items.size() == 1 ? ",)" : ")") : "]";
      return Status::Ok();
    }
    case Value::Type::kDict:
      return ReprDict(v.dict(), depth, out);
    case Value::Type::kObject:
      return ReprObject(v.object(), depth, out);
    case Value::Type::kFunc:
      ReprFunc(v.func(), out);
      return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);  // "-1.2345e+02"
  const size_t e = sci.find('e');
  std::string digits;
  const bool negative = sci[0] == '-';
  for (size_t i = negative ? 1 : 0; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  const int exp = std::stoi(sci.substr(e + 1));
  std::string out = negative ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      if (digits.size() < static_cast<size_t>(exp) + 1) digits.append(exp + 1 - digits.size(), '0');
      out += digits.substr(0, exp + 1) + ".";
      out += digits.size() > static_cast<size_t>(exp) + 1 ? digits.substr(exp + 1) : "0";
    } else {
      out += "0." + std::string(-exp - 1, '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + ebuf;
}

std::string StrRepr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    const char32_t c = DecodeUtf8(s, &i);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!IsPyPrintable(c)) {
      AppendEscape(&out, c);
    } else {
      AppendUtf8(&out, c);
    }
  }
  out += quote;
  return out;
}

Result<std::string> Repr(const Value& v) {
  std::string out;
  PAGODA_RETURN_IF_ERROR(ReprAt(v, 0, &out));
  return out;
}

Result<Text> ToText(const Value& v) {
  if (v.is_string()) return v.text();
  if (v.is_undefined()) return Text();
  PAGODA_ASSIGN_OR_RETURN(std::string s, Repr(v));
  return Text(std::move(s), HasContent(v));
}

}  // namespace pagoda::jinja
