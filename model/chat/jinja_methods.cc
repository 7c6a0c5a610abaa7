// Python's str, dict and list methods as templates call them (message.content.strip(),
// text.split('</think>'), d.items(), ...).
#include <algorithm>
#include <string>
#include <vector>

#include "model/chat/jinja_builtins.h"
#include "model/chat/jinja_format.h"
#include "model/chat/jinja_repr.h"
#include "model/chat/jinja_unicode.h"

namespace pagoda::jinja {
namespace {

using Type = Value::Type;

bool IsLineBreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

Result<std::string> StrArg(const std::optional<Value>& v, std::string_view what) {
  if (!v || !v->is_string()) {
    return InvalidArgument(std::string(what) + " must be str, not " +
                           (v ? TypeName(*v) : std::string("missing")));
  }
  return v->str();
}

// strip / lstrip / rstrip with exact provenance.
Result<Value> Strip(const Value& self, const Args& args, bool left, bool right) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("strip", args, {"chars"}));
  std::vector<char32_t> chars;
  const bool whitespace = !a[0] || a[0]->is_none();
  if (!whitespace) {
    PAGODA_ASSIGN_OR_RETURN(std::string set, StrArg(a[0], "strip arg"));
    for (size_t i = 0; i < set.size();) chars.push_back(DecodeUtf8(set, &i));
  }
  auto strip_char = [&](char32_t c) {
    return whitespace ? IsPySpace(c) : std::find(chars.begin(), chars.end(), c) != chars.end();
  };
  const std::string& s = self.str();
  size_t b = 0;
  while (left && b < s.size()) {
    size_t next = b;
    if (!strip_char(DecodeUtf8(s, &next))) break;
    b = next;
  }
  size_t e = s.size();
  if (right) {  // the end of the last character kept
    e = b;
    for (size_t i = b; i < s.size();) {
      if (!strip_char(DecodeUtf8(s, &i))) e = i;
    }
  }
  return Value::Str(self.text().Sub(b, e));
}

// Splits at runs of whitespace (sep=None) from the left: Python's str.split().
std::vector<std::pair<size_t, size_t>> SplitWhitespace(const std::string& s, int64_t maxsplit) {
  std::vector<std::pair<size_t, size_t>> words;  // byte ranges
  auto skip = [&](size_t i, bool space) {        // past the run of (non-)space at i
    for (size_t next = i; i < s.size(); i = next) {
      if (IsPySpace(DecodeUtf8(s, &next)) != space) break;
    }
    return i;
  };
  for (size_t i = skip(0, true); i < s.size(); i = skip(i, true)) {
    if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
      words.emplace_back(i, s.size());
      break;
    }
    const size_t start = i;
    i = skip(i, false);
    words.emplace_back(start, i);
  }
  return words;
}

// str.rsplit(None, maxsplit): from the right.
std::vector<std::pair<size_t, size_t>> RSplitWhitespace(const std::string& s, int64_t maxsplit) {
  std::vector<std::pair<size_t, size_t>> words;
  const std::vector<size_t> off = CodePointOffsets(s);
  auto space = [&](size_t k) {
    size_t at = off[k];
    return IsPySpace(DecodeUtf8(s, &at));
  };
  size_t k = off.size() - 1;
  while (k > 0) {
    while (k > 0 && space(k - 1)) --k;
    if (k == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
      words.emplace_back(0, off[k]);
      break;
    }
    const size_t end = k;
    while (k > 0 && !space(k - 1)) --k;
    words.emplace_back(off[k], off[end]);
  }
  std::reverse(words.begin(), words.end());
  return words;
}

Result<Value> Split(Context& ctx, const Value& self, const Args& args, bool from_right) {
  PAGODA_ASSIGN_OR_RETURN(auto a,
                          BindArgs(from_right ? "rsplit" : "split", args, {"sep", "maxsplit"}));
  const int64_t maxsplit = a[1] && a[1]->is_int() ? a[1]->as_int() : -1;
  const std::string& s = self.str();
  PAGODA_RETURN_IF_ERROR(ctx.Built(s.size()));
  std::vector<std::pair<size_t, size_t>> ranges;
  if (!a[0] || a[0]->is_none()) {
    ranges =
        from_right && maxsplit >= 0 ? RSplitWhitespace(s, maxsplit) : SplitWhitespace(s, maxsplit);
  } else {
    PAGODA_ASSIGN_OR_RETURN(std::string sep, StrArg(a[0], "separator"));
    if (sep.empty()) return InvalidArgument("empty separator");
    if (!from_right) {
      size_t start = 0, at;
      while ((maxsplit < 0 || static_cast<int64_t>(ranges.size()) < maxsplit) &&
             (at = s.find(sep, start)) != std::string::npos) {
        ranges.emplace_back(start, at);
        start = at + sep.size();
        PAGODA_RETURN_IF_ERROR(ctx.CheckListSize(ranges.size()));
      }
      ranges.emplace_back(start, s.size());
    } else {
      size_t end = s.size();
      while (maxsplit < 0 || static_cast<int64_t>(ranges.size()) < maxsplit) {
        if (end < sep.size()) break;
        const size_t at = s.rfind(sep, end - sep.size());
        if (at == std::string::npos) break;
        ranges.emplace_back(at + sep.size(), end);
        end = at;
        PAGODA_RETURN_IF_ERROR(ctx.CheckListSize(ranges.size()));
      }
      ranges.emplace_back(0, end);
      std::reverse(ranges.begin(), ranges.end());
    }
  }
  PAGODA_RETURN_IF_ERROR(ctx.CheckListSize(ranges.size()));
  std::vector<Value> parts;
  for (const auto& [b, e] : ranges) parts.push_back(Value::Str(self.text().Sub(b, e)));
  return MakeList(std::move(parts));
}

Result<Value> SplitLines(Context& ctx, const Value& self, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("splitlines", args, {"keepends"}));
  const bool keep = a[0] && Truthy(*a[0]);
  const std::string& s = self.str();
  std::vector<Value> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const char32_t c = DecodeUtf8(s, &i);
    if (!IsLineBreak(c)) continue;
    if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
    lines.push_back(Value::Str(self.text().Sub(start, keep ? i : at)));
    start = i;
    PAGODA_RETURN_IF_ERROR(ctx.CheckListSize(lines.size()));
  }
  if (start < s.size()) lines.push_back(Value::Str(self.text().Sub(start, s.size())));
  return MakeList(std::move(lines));
}

// The code-point range [start, end) of Python's optional start / end arguments, as bytes.
Result<std::pair<size_t, size_t>> ByteRange(const std::string& s, const std::optional<Value>& start,
                                            const std::optional<Value>& end) {
  if ((!start || start->is_none()) && (!end || end->is_none())) {
    return std::make_pair(size_t{0}, s.size());
  }
  const std::vector<size_t> off = CodePointOffsets(s);
  const int64_t n = static_cast<int64_t>(off.size()) - 1;
  auto bound = [&](const std::optional<Value>& v, int64_t dflt) -> Result<int64_t> {
    if (!v || v->is_none()) return dflt;
    if (!v->is_int()) return InvalidArgument("slice indices must be integers or None");
    int64_t x = v->as_int();
    if (x < 0) x = std::max<int64_t>(0, x + n);
    return std::min(x, n);
  };
  PAGODA_ASSIGN_OR_RETURN(int64_t b, bound(start, 0));
  PAGODA_ASSIGN_OR_RETURN(int64_t e, bound(end, n));
  if (e < b) e = b;
  return std::make_pair(off[b], off[e]);
}

Result<Value> StartsEnds(const Value& self, const Args& args, bool ends) {
  PAGODA_ASSIGN_OR_RETURN(
      auto a, BindArgs(ends ? "endswith" : "startswith", args, {"prefix", "start", "end"}, 1));
  PAGODA_ASSIGN_OR_RETURN(auto range, ByteRange(self.str(), a[1], a[2]));
  const std::string_view s =
      std::string_view(self.str()).substr(range.first, range.second - range.first);
  std::vector<Value> candidates;
  if (a[0]->is(Type::kList) && a[0]->list().tuple) {
    candidates = a[0]->list().items;
  } else {
    candidates = {*a[0]};
  }
  for (const Value& c : candidates) {
    if (!c.is_string()) {
      return InvalidArgument(std::string(ends ? "endswith" : "startswith") +
                             " first arg must be str or a tuple of str, not " + TypeName(c));
    }
    const std::string& p = c.str();
    if (p.size() <= s.size() &&
        (ends ? s.compare(s.size() - p.size(), p.size(), p) : s.compare(0, p.size(), p)) == 0) {
      return Value::Bool(true);
    }
  }
  return Value::Bool(false);
}

// find / rfind / index / rindex / count.
Result<Value> Find(const Value& self, const Args& args, std::string_view name) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"sub", "start", "end"}, 1));
  PAGODA_ASSIGN_OR_RETURN(std::string sub, StrArg(a[0], "substring"));
  PAGODA_ASSIGN_OR_RETURN(auto range, ByteRange(self.str(), a[1], a[2]));
  const std::string_view s = std::string_view(self.str()).substr(0, range.second);
  if (name == "count") {
    if (sub.empty()) {
      return Value::Int(static_cast<int64_t>(CountCodePoints(s.substr(range.first))) + 1);
    }
    int64_t n = 0;
    for (size_t at = s.find(sub, range.first); at != std::string::npos;
         at = s.find(sub, at + sub.size())) {
      ++n;
    }
    return Value::Int(n);
  }
  const bool right = name[0] == 'r';
  size_t at = right ? s.rfind(sub) : s.find(sub, range.first);
  if (at != std::string::npos && at < range.first) at = std::string::npos;
  if (at == std::string::npos) {
    if (name.find("index") != std::string_view::npos) return InvalidArgument("substring not found");
    return Value::Int(-1);
  }
  return Value::Int(static_cast<int64_t>(CountCodePoints(s.substr(0, at))));
}

Result<Value> Replace(Context& ctx, const Value& self, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("replace", args, {"old", "new", "count"}, 2));
  PAGODA_ASSIGN_OR_RETURN(std::string old_s, StrArg(a[0], "replace() argument 1"));
  PAGODA_ASSIGN_OR_RETURN(std::string new_s, StrArg(a[1], "replace() argument 2"));
  int64_t count = a[2] && a[2]->is_int() ? a[2]->as_int() : -1;
  const std::string& s = self.str();
  const bool content = self.text().has_content() || HasContent(*a[0]) || HasContent(*a[1]);
  std::string out;
  if (old_s.empty()) {
    const std::vector<size_t> off = CodePointOffsets(s);
    PAGODA_RETURN_IF_ERROR(ctx.CheckStringSize(s.size() + off.size() * new_s.size()));
    for (size_t k = 0; k + 1 < off.size(); ++k) {
      if (count < 0 || static_cast<int64_t>(k) < count) out += new_s;
      out.append(s, off[k], off[k + 1] - off[k]);
    }
    if (count < 0 || static_cast<int64_t>(off.size()) - 1 < count) out += new_s;
  } else {
    size_t start = 0, at;
    while (count != 0 && (at = s.find(old_s, start)) != std::string::npos) {
      out.append(s, start, at - start);
      out += new_s;
      PAGODA_RETURN_IF_ERROR(ctx.CheckStringSize(out.size()));
      start = at + old_s.size();
      if (count > 0) --count;
    }
    out.append(s, start, std::string::npos);
  }
  PAGODA_RETURN_IF_ERROR(ctx.Built(out.size()));
  return Value::Str(std::move(out), content);
}

// center / ljust / rjust / zfill.
Result<Value> Justify(Context& ctx, const Value& self, const Args& args, std::string_view name) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"width", "fillchar"}, 1));
  if (!a[0]->is_int()) return InvalidArgument(std::string(name) + ": width must be an integer");
  std::string fill = " ";
  if (a[1]) {
    PAGODA_ASSIGN_OR_RETURN(fill, StrArg(a[1], "fillchar"));
    if (CountCodePoints(fill) != 1) {
      return InvalidArgument("The fill character must be exactly one character long");
    }
  }
  if (name == "zfill") fill = "0";
  const int64_t width = a[0]->as_int();
  const int64_t len = static_cast<int64_t>(CountCodePoints(self.str()));
  if (width <= len) return self;
  PAGODA_RETURN_IF_ERROR(ctx.CheckStringSize(self.str().size() + (width - len) * fill.size()));
  const int64_t pad = width - len;
  int64_t left = 0;
  if (name == "center") {
    left = pad / 2 + (pad & width & 1);  // CPython's rounding
  } else if (name == "rjust" || name == "zfill") {
    left = pad;
  }
  auto repeat = [&](int64_t n) {
    std::string r;
    for (int64_t i = 0; i < n; ++i) r += fill;
    return r;
  };
  Text out(repeat(left), false);
  std::string body = self.str();
  if (name == "zfill" && !body.empty() && (body[0] == '-' || body[0] == '+')) {
    out = Text(body.substr(0, 1) + repeat(left), self.text().has_content());
    body = body.substr(1);
    out.Append(Text(body, self.text().has_content()));
  } else {
    out.Append(self.text());
  }
  out.Append(repeat(pad - left), false);
  return Value::Str(std::move(out));
}

Result<Value> Join(Context& ctx, const Value& self, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("join", args, {"iterable"}, 1));
  std::vector<Value> items;
  if (a[0]->is(Type::kList)) {
    items = a[0]->list().items;
  } else if (a[0]->is(Type::kDict)) {
    for (const auto& [k, v] : a[0]->dict().entries()) items.push_back(k);
  } else if (a[0]->is_string()) {
    PAGODA_RETURN_IF_ERROR(ctx.CheckListSize(CountCodePoints(a[0]->str())));
    Text t = a[0]->text();
    for (size_t i = 0; i < t.size();) {
      const size_t at = i;
      DecodeUtf8(t.str(), &i);
      items.push_back(Value::Str(t.Sub(at, i)));
    }
  } else {
    return InvalidArgument("can only join an iterable");
  }
  Text out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      return InvalidArgument("sequence item " + std::to_string(i) + ": expected str instance, " +
                             TypeName(items[i]) + " found");
    }
    if (i > 0) out.Append(self.text());
    out.Append(items[i].text());
    PAGODA_RETURN_IF_ERROR(ctx.CheckStringSize(out.size()));
  }
  PAGODA_RETURN_IF_ERROR(ctx.Built(out.size()));
  return Value::Str(std::move(out));
}

Result<Value> Partition(const Value& self, const Args& args, bool from_right) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("partition", args, {"sep"}, 1));
  PAGODA_ASSIGN_OR_RETURN(std::string sep, StrArg(a[0], "separator"));
  if (sep.empty()) return InvalidArgument("empty separator");
  const std::string& s = self.str();
  const size_t at = from_right ? s.rfind(sep) : s.find(sep);
  const Text& t = self.text();
  if (at == std::string::npos) {
    return from_right ? MakeList({Value::Str(""), Value::Str(""), self}, true)
                      : MakeList({self, Value::Str(""), Value::Str("")}, true);
  }
  return MakeList({Value::Str(t.Sub(0, at)), Value::Str(t.Sub(at, at + sep.size())),
                   Value::Str(t.Sub(at + sep.size(), s.size()))},
                  true);
}

Result<Value> RemoveAffix(const Value& self, const Args& args, bool suffix) {
  PAGODA_ASSIGN_OR_RETURN(auto a,
                          BindArgs(suffix ? "removesuffix" : "removeprefix", args, {"affix"}, 1));
  PAGODA_ASSIGN_OR_RETURN(std::string affix, StrArg(a[0], "argument"));
  const std::string& s = self.str();
  if (affix.empty() || affix.size() > s.size()) return self;
  if (suffix && s.compare(s.size() - affix.size(), affix.size(), affix) == 0) {
    return Value::Str(self.text().Sub(0, s.size() - affix.size()));
  }
  if (!suffix && s.compare(0, affix.size(), affix) == 0) {
    return Value::Str(self.text().Sub(affix.size(), s.size()));
  }
  return self;
}

Result<Value> Predicate(const Value& self, std::string_view name) {
  const std::string& s = self.str();
  if (name == "isascii") {
    return Value::Bool(std::all_of(s.begin(), s.end(),
                                   [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
  }
  bool any = false, all = true, cased = false, title_ok = true, prev_cased = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t c = DecodeUtf8(s, &i);
    any = true;
    bool ok = false;
    if (name == "isalpha") ok = IsPyAlpha(c);
    if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") ok = IsPyDigit(c);
    if (name == "isalnum") ok = IsPyAlpha(c) || IsPyDigit(c);
    if (name == "isspace") ok = IsPySpace(c);
    if (name == "isprintable") ok = IsPyPrintable(c);
    if (name == "isidentifier") ok = IsPyAlpha(c) || c == '_' || (IsPyDigit(c) && i > 1);
    if (name == "islower") ok = !IsPyUpper(c), cased = cased || IsPyLower(c);
    if (name == "isupper") ok = !IsPyLower(c), cased = cased || IsPyUpper(c);
    if (name == "istitle") {
      const bool up = IsPyUpper(c), low = IsPyLower(c);
      if ((up && prev_cased) || (low && !prev_cased)) title_ok = false;
      cased = cased || up || low;
      prev_cased = up || low;
      ok = true;
    }
    all = all && ok;
  }
  if (name == "isprintable") return Value::Bool(all);
  if (name == "islower" || name == "isupper") return Value::Bool(all && cased);
  if (name == "istitle") return Value::Bool(title_ok && cased);
  return Value::Bool(any && all);
}

template <std::string (*Fn)(std::string_view)>
Value CaseMethod(const Value& self) {
  return Value::Str(Fn(self.str()), self.text().has_content());
}

Result<Value> StrMethod(Context& ctx, const Value& self, std::string_view name, const Args& args) {
  if (name == "strip") return Strip(self, args, true, true);
  if (name == "lstrip") return Strip(self, args, true, false);
  if (name == "rstrip") return Strip(self, args, false, true);
  if (name == "split") return Split(ctx, self, args, false);
  if (name == "rsplit") return Split(ctx, self, args, true);
  if (name == "splitlines") return SplitLines(ctx, self, args);
  if (name == "startswith") return StartsEnds(self, args, false);
  if (name == "endswith") return StartsEnds(self, args, true);
  if (name == "upper") return CaseMethod<PyUpper>(self);
  if (name == "lower" || name == "casefold") return CaseMethod<PyLower>(self);
  if (name == "title") return CaseMethod<PyTitle>(self);
  if (name == "capitalize") return CaseMethod<PyCapitalize>(self);
  if (name == "swapcase") return CaseMethod<PySwapCase>(self);
  if (name == "replace") return Replace(ctx, self, args);
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return Find(self, args, name);
  }
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    return Justify(ctx, self, args, name);
  }
  if (name == "join") return Join(ctx, self, args);
  if (name == "partition") return Partition(self, args, false);
  if (name == "rpartition") return Partition(self, args, true);
  if (name == "removeprefix") return RemoveAffix(self, args, false);
  if (name == "removesuffix") return RemoveAffix(self, args, true);
  if (name == "format") return StrFormat(ctx, self, args);
  if (name.substr(0, 2) == "is") return Predicate(self, name);
  return Unimplemented("str." + std::string(name) + "() is not supported");
}

Result<Value> DictMethod(Context& ctx, const Value& self, std::string_view name, const Args& args) {
  const Dict& d = self.dict();
  if (name == "get") {
    PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("get", args, {"key", "default"}, 1));
    const Value* v = d.Find(*a[0]);
    return v ? *v : (a[1] ? *a[1] : Value::NoneValue());
  }
  PAGODA_RETURN_IF_ERROR(BindArgs(name, args, {}).status());
  if (name == "copy") return self;
  PAGODA_RETURN_IF_ERROR(ctx.Work(d.size() * 2));
  std::vector<Value> out;
  for (const auto& [k, v] : d.entries()) {
    if (name == "keys") {
      out.push_back(k);
    } else if (name == "values") {
      out.push_back(v);
    } else {
      PAGODA_ASSIGN_OR_RETURN(Value pair, MakeList({k, v}, true));
      out.push_back(std::move(pair));
    }
  }
  return MakeList(std::move(out));
}

Result<Value> ListMethod(Context& ctx, const Value& self, std::string_view name, const Args& args) {
  if (name == "copy") return self;
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs(name, args, {"value"}, 1));
  const auto& items = self.list().items;
  PAGODA_RETURN_IF_ERROR(ctx.Work(items.size()));
  int64_t count = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!Equals(items[i], *a[0])) continue;
    if (name == "index") return Value::Int(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index") return InvalidArgument("value is not in list");
  return Value::Int(count);
}

}  // namespace

Result<Value> CallMethod(Context& ctx, const Value& self, std::string_view name, const Args& args) {
  PAGODA_RETURN_IF_ERROR(ctx.Step());
  switch (self.type()) {
    case Type::kString:
      return StrMethod(ctx, self, name, args);
    case Type::kDict:
      return DictMethod(ctx, self, name, args);
    case Type::kList:
      return ListMethod(ctx, self, name, args);
    default:
      return InvalidArgument("'" + TypeName(self) + "' object has no method " + std::string(name));
  }
}

}  // namespace pagoda::jinja
