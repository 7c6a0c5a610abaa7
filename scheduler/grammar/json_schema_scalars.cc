// Strings (minLength / maxLength, pattern, format) and numbers (minimum / maximum and their
// exclusive forms).
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/grammar/json_schema_internal.h"
#include "scheduler/grammar/number_range.h"
#include "scheduler/grammar/regex_compiler.h"

namespace pagoda::grammar::schema {
namespace {

// The formats a grammar can check, as regexes over the decoded string. Dates never name a day
// a month lacks (February stops at 28), so Python's date.fromisoformat accepts every one.
std::optional<std::string> FormatRegex(std::string_view format) {
  const std::string date =
      "[1-9][0-9]{3}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-"
      "(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))";
  const std::string time =
      "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?"
      "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
  const std::string label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,30}[A-Za-z0-9])?";
  const std::string octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
  if (format == "date") return date;
  if (format == "time") return time;
  if (format == "date-time") return date + "T" + time;
  if (format == "uuid") {
    return "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
  }
  if (format == "email") {
    return "[A-Za-z0-9_+-]{1,32}(?:\\.[A-Za-z0-9_+-]{1,32}){0,3}@" + label + "(?:\\." + label +
           "){0,3}\\.[A-Za-z]{2,12}";
  }
  if (format == "ipv4") return "(?:" + octet + "\\.){3}" + octet;
  if (format == "hostname") return label + "(?:\\." + label + "){0,4}";
  if (format == "uri") {
    return "[A-Za-z][A-Za-z0-9+.-]{0,15}:(?:[A-Za-z0-9._~:/?#@!$&'()*+,;=-]|%[0-9A-Fa-f]{2})"
           "{1,200}";
  }
  return std::nullopt;  // an annotation then, as JSON schema says of unknown formats
}

// A simpler form of a format whose full regex can be longer than maxLength `hi` (a few
// hundred characters for an email address): every match at most `hi` long.
std::optional<std::string> ShortFormatRegex(std::string_view format, int64_t hi) {
  const auto n = [](int64_t v) { return std::to_string(v); };
  if (format == "email" && hi >= 6) {
    const int64_t tld = std::min<int64_t>(6, hi - 4), rest = hi - 2 - tld;
    const int64_t local = std::clamp<int64_t>(rest / 2, 1, 32);
    const int64_t label = std::clamp<int64_t>(rest - local, 1, 32);
    return "[A-Za-z0-9_+-]{1," + n(local) + "}@[A-Za-z0-9]{1," + n(label) + "}\\.[A-Za-z]{2," +
           n(tld) + "}";
  }
  if (format == "hostname" && hi >= 1) return "[A-Za-z0-9]{1," + n(std::min<int64_t>(hi, 63)) + "}";
  if (format == "uri" && hi >= 3) {
    const int64_t scheme = std::min<int64_t>({14, std::max<int64_t>(3, (hi - 3) / 3), hi - 3});
    const int64_t rest = std::min<int64_t>(200, hi - 2 - scheme);
    return "[A-Za-z][A-Za-z0-9+.-]{0," + n(scheme) + "}:[A-Za-z0-9._~:/?#@!$&'()*+,;=-]{1," +
           n(rest) + "}";
  }
  return std::nullopt;
}

bool IsCharRun(const regex::Node& n) {
  if (n.kind != regex::Node::Kind::kRepeat) return false;
  const regex::LengthRange r = regex::Lengths(n.children[0]);
  return r.min == 1 && r.max == 1;
}

// The single run of characters whose count varies, if there is exactly one (else nullptr).
regex::Node* VariableRun(regex::Node& node, int64_t& fixed) {
  fixed = 0;
  if (IsCharRun(node)) return &node;
  if (node.kind != regex::Node::Kind::kConcat) return nullptr;
  regex::Node* run = nullptr;
  for (regex::Node& c : node.children) {
    const regex::LengthRange r = regex::Lengths(c);
    if (r.min == r.max) {
      fixed += r.min;
    } else if (run != nullptr || !IsCharRun(c)) {
      return nullptr;
    } else {
      run = &c;
    }
  }
  return run;
}

// Makes the regex's matches respect minLength / maxLength: as they are, or by tightening the
// one variable run of characters ([a-z]+ and the like); anything else is an error.
Result<regex::Node> FitLengths(regex::Node node, int64_t lo, int64_t hi, const std::string& what) {
  const regex::LengthRange r = regex::Lengths(node);
  if (r.min >= lo && (hi < 0 || (r.max >= 0 && r.max <= hi))) return node;
  int64_t fixed = 0;
  regex::Node* run = VariableRun(node, fixed);
  if (run == nullptr) {
    return InvalidArgument(what +
                           " cannot be combined with minLength / maxLength (only a "
                           "pattern with one variable run of characters can)");
  }
  const int64_t min = std::max(run->min, lo - fixed);
  int64_t max = run->max;
  if (hi >= 0) max = max < 0 ? hi - fixed : std::min(max, hi - fixed);
  if (max >= 0 && min > max) {
    return Unsatisfiable(what + ": no match has a length within minLength / maxLength");
  }
  run->min = std::max<int64_t>(min, 0);
  run->max = max;
  return node;
}

struct Bound {
  bool set = false;
  double value = 0;
  bool exclusive = false;
  std::string keyword;
  std::string pointer;
};

// Keeps the tighter of two bounds (`upper`: the smaller value is tighter).
void Tighten(Bound& b, double v, bool exclusive, bool upper, const char* keyword,
             const std::string& pointer) {
  const bool tighter =
      !b.set || (upper ? v < b.value : v > b.value) || (v == b.value && exclusive && !b.exclusive);
  if (tighter) b = Bound{true, v, exclusive, keyword, pointer};
}

Status ReadBounds(const Part& p, Bound& lo, Bound& hi) {
  const Json& s = *p.schema;
  for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
    auto it = s.find(key);
    if (it == s.end()) continue;
    const bool upper = std::string_view(key).find("ax") != std::string_view::npos;
    const bool exclusive = std::string_view(key).starts_with("exclusive");
    if (it->is_boolean()) {  // draft 4: exclusiveMinimum: true modifies minimum
      auto base = s.find(upper ? "maximum" : "minimum");
      if (!exclusive || !it->get<bool>() || base == s.end() || !base->is_number()) continue;
      Tighten(upper ? hi : lo, base->get<double>(), true, upper, key, p.pointer);
      continue;
    }
    if (!it->is_number()) return InvalidArgument(At(key, p.pointer) + " must be a number");
    Tighten(upper ? hi : lo, it->get<double>(), exclusive, upper, key, p.pointer);
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> Compiler::VisitString(const Conj& conj) {
  int64_t lo = 0, hi = -1;
  std::vector<std::pair<std::string, std::string>> regexes;  // text, what
  std::string format;
  for (const Part& p : conj) {
    const Json& s = *p.schema;
    if (auto it = s.find("minLength"); it != s.end()) {
      PAGODA_ASSIGN_OR_RETURN(const int64_t v, CountKeyword(*it, "minLength", p.pointer));
      lo = std::max(lo, v);
    }
    if (auto it = s.find("maxLength"); it != s.end()) {
      PAGODA_ASSIGN_OR_RETURN(const int64_t v, CountKeyword(*it, "maxLength", p.pointer));
      hi = hi < 0 ? v : std::min(hi, v);
    }
    for (const char* key : {"pattern", "format"}) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      if (!it->is_string()) return InvalidArgument(At(key, p.pointer) + " must be a string");
      std::optional<std::string> text = it->get<std::string>();
      if (std::string_view(key) == "format") {
        format = *text;
        text = FormatRegex(*text);
      }
      if (!text) continue;
      const bool seen = std::any_of(regexes.begin(), regexes.end(),
                                    [&](const auto& r) { return r.first == *text; });
      if (!seen) regexes.emplace_back(*text, At(key, p.pointer));
    }
  }
  const std::string where = conj[0].pointer.empty() ? "/" : conj[0].pointer;
  if (hi >= 0 && lo > hi) {
    return Unsatisfiable("minLength " + std::to_string(lo) + " > maxLength at " + where);
  }
  if (regexes.size() > 1) {
    return InvalidArgument(regexes[0].second + " and " + regexes[1].second +
                           " cannot both apply to one string (one pattern or format only)");
  }
  const std::string quote = "\"\\\"\"", sp = Space();
  std::string inner;
  if (regexes.empty()) {
    inner = rules_.Repeat(rules_.Use(gbnf::Primitive::kJsonChar), lo, hi,
                          "minLength / maxLength at " + where);
  } else {
    const auto& [text, what] = regexes[0];
    Result<regex::Node> node = regex::Parse(text, limits_);
    if (!node.ok()) return node.status().WithPrefix(what);
    const int64_t longest = regex::Lengths(*node).max;
    const std::optional<std::string> short_form =
        format.empty() || hi < 0 || (longest >= 0 && longest <= hi) ? std::nullopt
                                                                    : ShortFormatRegex(format, hi);
    if (short_form) node = regex::Parse(*short_form, limits_);
    if (!node.ok()) return node.status().WithPrefix(what);
    PAGODA_ASSIGN_OR_RETURN(const regex::Node fitted, FitLengths(std::move(*node), lo, hi, what));
    inner = regex::Emit(fitted, regex::Target::kJsonString, rules_, what);
  }
  return quote + (inner.empty() ? "" : " " + inner) + " " + quote + " " + sp;
}

Result<std::string> Compiler::VisitNumber(const Conj& conj, bool integer_only) {
  Bound lo, hi;
  for (const Part& p : conj) PAGODA_RETURN_IF_ERROR(ReadBounds(p, lo, hi));
  if (!lo.set && !hi.set) {
    return rules_.Use(integer_only ? gbnf::Primitive::kInteger : gbnf::Primitive::kNumber);
  }
  const std::string sp = Space();
  const std::string where = conj[0].pointer.empty() ? "/" : conj[0].pointer;
  const double limit =
      static_cast<double>(integer_only ? gbnf::kMaxRangeInteger : gbnf::kMaxRangeNumber);
  for (const Bound* b : {&lo, &hi}) {
    if (!b->set) continue;
    const bool beyond = b == &lo ? b->value > limit : b->value < -limit;
    if (beyond) {
      return InvalidArgument(At(b->keyword, b->pointer) + ": bounds beyond +-" +
                             std::to_string(static_cast<int64_t>(limit)) + " are not supported");
    }
    if (!integer_only && std::floor(b->value) != b->value) {
      return InvalidArgument(At(b->keyword, b->pointer) +
                             ": only integer bounds are supported for type number");
    }
  }
  if (integer_only) {
    double l = -limit, h = limit;
    if (lo.set) l = std::max(l, lo.exclusive ? std::floor(lo.value) + 1 : std::ceil(lo.value));
    if (hi.set) h = std::min(h, hi.exclusive ? std::ceil(hi.value) - 1 : std::floor(hi.value));
    if (l > h) return Unsatisfiable("no integer lies between the bounds at " + where);
    return gbnf::IntegerRangeGbnf(static_cast<int64_t>(l), static_cast<int64_t>(h)) + " " + sp;
  }
  gbnf::NumberBound l{-static_cast<int64_t>(limit), false}, h{static_cast<int64_t>(limit), false};
  if (lo.set && lo.value >= -limit) l = {static_cast<int64_t>(lo.value), lo.exclusive};
  if (hi.set && hi.value <= limit) h = {static_cast<int64_t>(hi.value), hi.exclusive};
  const std::string text = gbnf::NumberRangeGbnf(l, h);
  if (text.empty()) return Unsatisfiable("no number lies between the bounds at " + where);
  return text + " " + sp;
}

}  // namespace pagoda::grammar::schema
