#include "model/chat/jinja_format.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "model/chat/jinja_access.h"
#include "model/chat/jinja_repr.h"
#include "model/chat/jinja_unicode.h"

namespace pagoda::jinja {
namespace {

constexpr int kMaxPrecision = 1000;

bool IsDigitChar(char c) { return c >= '0' && c <= '9'; }

// A printf / format-spec conversion, parsed.
struct Spec {
  char fill = ' ';
  char align = 0;  // '<', '>', '^', '=' or 0 (default)
  char sign = '-';
  bool alternate = false;
  bool zero = false;
  bool grouping = false;
  int64_t width = -1;
  int64_t precision = -1;
  char type = 0;
};

// Pads `s` to spec.width code points.
std::string Pad(std::string s, const Spec& spec, char default_align) {
  const int64_t len = static_cast<int64_t>(CountCodePoints(s));
  if (spec.width <= len) return s;
  const size_t pad = static_cast<size_t>(spec.width - len);
  const char align = spec.align ? spec.align : default_align;
  if (align == '<') return s + std::string(pad, spec.fill);
  if (align == '^')
    return std::string(pad / 2, spec.fill) + s + std::string(pad - pad / 2, spec.fill);
  if (align == '=' && !s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) {
    return s.substr(0, 1) + std::string(pad, spec.fill) + s.substr(1);
  }
  return std::string(pad, spec.fill) + s;
}

std::string Group(const std::string& digits) {
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

Result<std::string> FormatInt(int64_t v, const Spec& spec, char type) {
  const bool neg = v < 0;
  const uint64_t mag = neg ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string digits, prefix;
  char buf[80];
  if (type == 'x' || type == 'X' || type == 'o' || type == 'b') {
    if (type == 'b') {
      for (uint64_t m = mag; m > 0; m >>= 1)
        digits.insert(digits.begin(), static_cast<char>('0' + (m & 1)));
      if (digits.empty()) digits = "0";
    } else {
      std::snprintf(buf, sizeof(buf), type == 'o' ? "%llo" : (type == 'x' ? "%llx" : "%llX"),
                    static_cast<unsigned long long>(mag));
      digits = buf;
    }
    if (spec.alternate) prefix = std::string("0") + (type == 'X' ? 'X' : type);
  } else {
    digits = std::to_string(mag);
    if (spec.grouping) digits = Group(digits);
  }
  if (spec.precision > static_cast<int64_t>(digits.size())) {
    digits.insert(0, spec.precision - digits.size(), '0');
  }
  const std::string sign = neg ? "-" : (spec.sign == '+' ? "+" : (spec.sign == ' ' ? " " : ""));
  if (spec.zero && spec.align == 0 && spec.width > 0) {
    const int64_t len = static_cast<int64_t>(sign.size() + prefix.size() + digits.size());
    if (spec.width > len) digits.insert(0, spec.width - len, '0');
  }
  return Pad(sign + prefix + digits, spec, '>');
}

Result<std::string> FormatFloat(double v, const Spec& spec, char type) {
  if (spec.precision > kMaxPrecision) return InvalidArgument("format precision too large");
  std::string s;
  if (type == 0 && spec.precision < 0) {
    s = FloatRepr(v);
  } else {
    const char conv = type == 0 ? 'g' : (type == '%' ? 'f' : type);
    const double x = type == '%' ? v * 100 : v;
    const int prec = spec.precision < 0 ? 6 : static_cast<int>(spec.precision);
    const std::string fmt = std::string("%") + (spec.alternate ? "#" : "") + ".*" + conv;
    std::vector<char> buf(kMaxPrecision + 400);
    std::snprintf(buf.data(), buf.size(), fmt.c_str(), prec, x);
    s = buf.data();
    if (type == '%') s += '%';
  }
  if (!s.empty() && s[0] != '-') {
    if (spec.sign == '+') s = "+" + s;
    if (spec.sign == ' ') s = " " + s;
  }
  if (spec.zero && spec.align == 0 && spec.width > static_cast<int64_t>(s.size())) {
    const size_t at = (s[0] == '-' || s[0] == '+' || s[0] == ' ') ? 1 : 0;
    s.insert(at, spec.width - s.size(), '0');
  }
  return Pad(s, spec, '>');
}

// One value converted by `type` (printf conversion or format-spec type) under `spec`.
Result<std::string> Convert(const Value& v, const Spec& spec, char type) {
  if (type == 's' || type == 0 || type == 'r' || type == 'a') {
    if (type == 0 && v.is_number() && !v.is(Value::Type::kBool)) {
      if (v.is(Value::Type::kFloat)) return FormatFloat(v.as_double(), spec, 0);
      return FormatInt(v.as_int(), spec, 'd');
    }
    std::string s;
    if (type == 'r' || type == 'a') {
      PAGODA_ASSIGN_OR_RETURN(s, Repr(v));
    } else {
      PAGODA_ASSIGN_OR_RETURN(Text t, ToText(v));
      s = t.str();
    }
    if (spec.precision >= 0) {
      const auto off = CodePointOffsets(s);
      if (spec.precision + 1 < static_cast<int64_t>(off.size())) s.resize(off[spec.precision]);
    }
    return Pad(std::move(s), spec, '<');
  }
  if (type == 'c') {
    if (v.is_string() && CountCodePoints(v.str()) == 1) return Pad(v.str(), spec, '<');
    if (!v.is_int()) return InvalidArgument("%c requires int or char");
    std::string s;
    AppendUtf8(&s, static_cast<char32_t>(v.as_int()));
    return Pad(std::move(s), spec, '<');
  }
  if (!v.is_number()) {
    return InvalidArgument(std::string("%") + type + " format: a real number is required, not " +
                           TypeName(v));
  }
  if (type == 'd' || type == 'i' || type == 'u' || type == 'n') {
    const int64_t i = v.is_int() ? v.as_int() : static_cast<int64_t>(std::trunc(v.as_double()));
    return FormatInt(i, spec, 'd');
  }
  if (type == 'x' || type == 'X' || type == 'o' || type == 'b') {
    if (!v.is_int()) {
      return InvalidArgument(std::string("%") + type + " format: an integer is required, not " +
                             TypeName(v));
    }
    return FormatInt(v.as_int(), spec, type);
  }
  if (std::string_view("eEfFgG%").find(type) != std::string_view::npos) {
    return FormatFloat(v.as_double(), spec, type);
  }
  return InvalidArgument(std::string("unsupported format character '") + type + "'");
}

// Reads a decimal number at s[*i] (bounded by the string-size limit).
Result<int64_t> ReadNumber(Context& ctx, std::string_view s, size_t* i) {
  int64_t n = 0;
  while (*i < s.size() && IsDigitChar(s[*i])) {
    n = n * 10 + (s[(*i)++] - '0');
    if (n > (int64_t{1} << 40)) return InvalidArgument("format width too large");
  }
  PAGODA_RETURN_IF_ERROR(ctx.CheckStringSize(static_cast<uint64_t>(n)));
  return n;
}

class PercentFormatter {
 public:
  PercentFormatter(Context& ctx, const Value& args) : ctx_(ctx) {
    if (args.is(Value::Type::kList) && args.list().tuple) {
      positional_ = args.list().items;
    } else {
      positional_ = {args};
      if (args.is(Value::Type::kDict)) mapping_ = &args.dict();
      // Python treats any non-tuple object with __getitem__ as a mapping: no arguments left over.
      lenient_ = args.is(Value::Type::kDict) || args.is(Value::Type::kList) || args.is_undefined();
    }
  }

  Result<std::string> Run(std::string_view fmt) {
    std::string out;
    for (size_t i = 0; i < fmt.size(); ++i) {
      if (fmt[i] != '%') {
        out += fmt[i];
        continue;
      }
      if (++i >= fmt.size()) return InvalidArgument("incomplete format");
      if (fmt[i] == '%') {
        out += '%';
        continue;
      }
      PAGODA_ASSIGN_OR_RETURN(std::string piece, One(fmt, &i));
      PAGODA_RETURN_IF_ERROR(ctx_.CheckStringSize(out.size() + piece.size()));
      out += piece;
    }
    if (next_ < positional_.size() && !lenient_) {
      return InvalidArgument("not all arguments converted during string formatting");
    }
    return out;
  }

 private:
  Result<Value> NextArg() {
    if (next_ >= positional_.size()) {
      return InvalidArgument("not enough arguments for format string");
    }
    return positional_[next_++];
  }

  Result<std::string> One(std::string_view fmt, size_t* i) {
    Value value;
    bool have_value = false;
    if (fmt[*i] == '(') {
      const size_t close = fmt.find(')', *i);
      if (close == std::string_view::npos) return InvalidArgument("incomplete format key");
      if (mapping_ == nullptr) return InvalidArgument("format requires a mapping");
      const std::string key(fmt.substr(*i + 1, close - *i - 1));
      const Value* v = mapping_->Find(key);
      if (v == nullptr) return InvalidArgument("KeyError: '" + key + "'");
      value = *v, have_value = true;
      *i = close + 1;
    }
    Spec spec;
    for (; *i < fmt.size() && std::string_view("-+ #0").find(fmt[*i]) != std::string_view::npos;
         ++*i) {
      const char f = fmt[*i];
      if (f == '-') spec.align = '<';
      if (f == '+' || f == ' ') spec.sign = (spec.sign == '+') ? '+' : f;
      if (f == '#') spec.alternate = true;
      if (f == '0') spec.zero = true;
    }
    PAGODA_ASSIGN_OR_RETURN(spec.width, ReadStar(fmt, i, -1));
    if (*i < fmt.size() && fmt[*i] == '.') {
      ++*i;
      PAGODA_ASSIGN_OR_RETURN(spec.precision, ReadStar(fmt, i, 0));
    }
    while (*i < fmt.size() && (fmt[*i] == 'h' || fmt[*i] == 'l' || fmt[*i] == 'L')) ++*i;
    if (*i >= fmt.size()) return InvalidArgument("incomplete format");
    if (spec.align == '<') spec.zero = false;
    const char type = fmt[*i];
    if (spec.align == 0 && (type == 's' || type == 'r' || type == 'a' || type == 'c')) {
      spec.align = '>';
    }
    if (!have_value) {
      PAGODA_ASSIGN_OR_RETURN(value, NextArg());
    }
    return Convert(value, spec, type);
  }

  Result<int64_t> ReadStar(std::string_view fmt, size_t* i, int64_t dflt) {
    if (*i < fmt.size() && fmt[*i] == '*') {
      ++*i;
      PAGODA_ASSIGN_OR_RETURN(Value v, NextArg());
      if (!v.is_int()) return InvalidArgument("* wants int");
      PAGODA_RETURN_IF_ERROR(
          ctx_.CheckStringSize(static_cast<uint64_t>(std::max<int64_t>(0, v.as_int()))));
      return v.as_int();
    }
    if (*i < fmt.size() && IsDigitChar(fmt[*i])) return ReadNumber(ctx_, fmt, i);
    return dflt;
  }

  Context& ctx_;
  std::vector<Value> positional_;
  const Dict* mapping_ = nullptr;
  size_t next_ = 0;
  bool lenient_ = false;
};

// Parses a str.format spec: [[fill]align][sign][#][0][width][,][.precision][type].
Result<Spec> ParseFormatSpec(Context& ctx, std::string_view s) {
  Spec spec;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1])) {
    spec.fill = s[0], spec.align = s[1], i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    spec.align = s[0], i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) spec.sign = s[i++];
  if (i < s.size() && s[i] == '#') spec.alternate = true, ++i;
  if (i < s.size() && s[i] == '0') spec.zero = true, ++i;
  if (i < s.size() && IsDigitChar(s[i])) {
    PAGODA_ASSIGN_OR_RETURN(spec.width, ReadNumber(ctx, s, &i));
  }
  if (i < s.size() && s[i] == ',') spec.grouping = true, ++i;
  if (i < s.size() && s[i] == '.') {
    ++i;
    PAGODA_ASSIGN_OR_RETURN(spec.precision, ReadNumber(ctx, s, &i));
  }
  if (i < s.size()) spec.type = s[i++];
  if (i != s.size()) return InvalidArgument("Invalid format specifier '" + std::string(s) + "'");
  if (spec.zero && spec.align == 0) spec.fill = '0', spec.align = '=';
  return spec;
}

Result<std::string> FormatField(Context& ctx, const Value& v, std::string_view conv,
                                std::string_view spec_text) {
  Value value = v;
  if (conv == "r" || conv == "a") {
    PAGODA_ASSIGN_OR_RETURN(std::string r, Repr(v));
    value = Value::Str(std::move(r));
  } else if (conv == "s") {
    PAGODA_ASSIGN_OR_RETURN(Text t, ToText(v));
    value = Value::Str(std::move(t));
  }
  PAGODA_ASSIGN_OR_RETURN(Spec spec, ParseFormatSpec(ctx, spec_text));
  if (!spec_text.empty() && !value.is_number() && !value.is_string()) {
    return InvalidArgument("unsupported format string passed to " + TypeName(value) +
                           ".__format__");
  }
  if (value.is_string() && spec.type != 0 && spec.type != 's') {
    return InvalidArgument(std::string("Unknown format code '") + spec.type +
                           "' for object of type 'str'");
  }
  if (value.is_number() && !value.is(Value::Type::kBool) && spec.type == 0 &&
      value.is(Value::Type::kFloat)) {
    return FormatFloat(value.as_double(), spec, 0);
  }
  if (value.is_int() && !value.is(Value::Type::kBool) &&
      std::string_view("eEfFgG%").find(spec.type) != std::string_view::npos && spec.type != 0) {
    return FormatFloat(value.as_double(), spec, spec.type);
  }
  return Convert(value, spec, spec.type == 0 && value.is_string() ? 's' : spec.type);
}

}  // namespace

Result<Value> PercentFormat(Context& ctx, const Value& fmt, const Value& args) {
  PAGODA_ASSIGN_OR_RETURN(std::string out, PercentFormatter(ctx, args).Run(fmt.str()));
  PAGODA_RETURN_IF_ERROR(ctx.Built(out.size()));
  return Value::Str(std::move(out), HasContent(fmt) || HasContent(args));
}

Result<Value> StrFormat(Context& ctx, const Value& fmt, const Args& args) {
  const std::string& f = fmt.str();
  std::string out;
  size_t auto_index = 0;
  bool content = HasContent(fmt);
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if ((c == '{' || c == '}') && i + 1 < f.size() && f[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c == '}') return InvalidArgument("Single '}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) return InvalidArgument("expected '}' before end of string");
    const std::string field = f.substr(i + 1, close - i - 1);
    i = close;
    const size_t colon = field.find(':');
    std::string name = field.substr(0, colon);
    const std::string spec = colon == std::string::npos ? "" : field.substr(colon + 1);
    std::string conv;
    if (const size_t bang = name.find('!'); bang != std::string::npos) {
      conv = name.substr(bang + 1);
      name.resize(bang);
    }
    const Value* v = nullptr;
    if (name.empty() || IsDigitChar(name[0])) {
      const size_t index = name.empty() ? auto_index++ : std::stoul(name.substr(0, 9));
      if (index >= args.positional.size()) {
        return InvalidArgument("Replacement index " + std::to_string(index) +
                               " out of range for positional args tuple");
      }
      v = &args.positional[index];
    } else {
      for (const auto& [k, x] : args.keyword) {
        if (k == name) v = &x;
      }
      if (v == nullptr) return InvalidArgument("KeyError: '" + name + "'");
    }
    content = content || HasContent(*v);
    PAGODA_ASSIGN_OR_RETURN(std::string piece, FormatField(ctx, *v, conv, spec));
    PAGODA_RETURN_IF_ERROR(ctx.CheckStringSize(out.size() + piece.size()));
    out += piece;
  }
  PAGODA_RETURN_IF_ERROR(ctx.Built(out.size()));
  return Value::Str(std::move(out), content);
}

}  // namespace pagoda::jinja
