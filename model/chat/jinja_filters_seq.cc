// Filters over sequences: select / reject (by test), selectattr / rejectattr, map, sorting,
// unique, min / max, sum, groupby.
#include <algorithm>
#include <string>
#include <vector>

#include "model/chat/jinja_access.h"
#include "model/chat/jinja_builtins.h"
#include "model/chat/jinja_filters_internal.h"
#include "model/chat/jinja_operators.h"
#include "model/chat/jinja_repr.h"
#include "model/chat/jinja_unicode.h"

namespace pagoda::jinja {
namespace {

using Type = Value::Type;

// select / reject / selectattr / rejectattr: keep the items whose test result is `want`.
Result<Value> Filtered(Context& ctx, const Value& v, const Args& args, bool by_attr, bool want) {
  if (!Truthy(v)) return MakeList({});  // jinja2 does not iterate a false value
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (args.positional.empty()) return InvalidArgument("Missing parameter for attribute name");
    if (!args.positional[0].is_string()) return InvalidArgument("attribute must be a string");
    attr = args.positional[0].str();
    next = 1;
  }
  std::string test;
  Args test_args;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) return InvalidArgument("test name must be a string");
    test = args.positional[next].str();
    test_args.positional.assign(args.positional.begin() + next + 1, args.positional.end());
    test_args.keyword = args.keyword;
  }
  std::vector<Value> out;
  for (const Value& item : items) {
    PAGODA_RETURN_IF_ERROR(ctx.Step());
    Value x = item;
    if (by_attr) {
      PAGODA_ASSIGN_OR_RETURN(x, GetPath(ctx, item, attr));
    }
    bool ok = Truthy(x);
    if (!test.empty()) {
      PAGODA_ASSIGN_OR_RETURN(ok, ApplyTest(ctx, test, x, test_args));
    }
    if (ok == want) out.push_back(item);
  }
  return MakeList(std::move(out));
}

Value IgnoreCase(const Value& v, bool case_sensitive) {
  if (case_sensitive || !v.is_string()) return v;
  return Value::Str(PyLower(v.str()));
}

// The sort key of `item`: the item, or its attribute(s) (comma-separated), case-folded.
Result<Value> SortKey(Context& ctx, const Value& item, const std::string& attribute,
                      bool case_sensitive) {
  if (attribute.empty()) return IgnoreCase(item, case_sensitive);
  if (attribute.find(',') == std::string::npos) {
    PAGODA_ASSIGN_OR_RETURN(Value x, GetPath(ctx, item, attribute));
    return IgnoreCase(x, case_sensitive);
  }
  std::vector<Value> parts;
  size_t start = 0;
  while (start <= attribute.size()) {
    size_t comma = attribute.find(',', start);
    if (comma == std::string::npos) comma = attribute.size();
    PAGODA_ASSIGN_OR_RETURN(Value x, GetPath(ctx, item, attribute.substr(start, comma - start)));
    parts.push_back(IgnoreCase(x, case_sensitive));
    start = comma + 1;
  }
  return MakeList(std::move(parts), true);
}

// Stable sort of (key, item) pairs by key with Python ordering; the first comparison error wins.
Status SortPairs(Context& ctx, std::vector<std::pair<Value, Value>>* pairs, bool reverse) {
  uint64_t log2n = 1;
  while ((uint64_t{1} << log2n) < pairs->size()) ++log2n;
  PAGODA_RETURN_IF_ERROR(ctx.Work(pairs->size() * log2n));
  Status error;
  std::stable_sort(pairs->begin(), pairs->end(), [&](const auto& a, const auto& b) {
    if (!error.ok()) return false;
    auto c = Compare(reverse ? b.first : a.first, reverse ? a.first : b.first, "<");
    if (!c.ok()) {
      error = c.status();
      return false;
    }
    return *c < 0;
  });
  return error;
}

Result<std::string> OptionalString(const std::optional<Value>& v) {
  if (!v || v->is_none()) return std::string();
  if (!v->is_string()) return InvalidArgument("attribute must be a string");
  return v->str();
}

Result<Value> Aggregate(Context& ctx, const Value& v, const Args& args, bool want_max) {
  PAGODA_ASSIGN_OR_RETURN(
      auto a, BindArgs(want_max ? "max" : "min", args, {"case_sensitive", "attribute"}));
  PAGODA_ASSIGN_OR_RETURN(std::string attr, OptionalString(a[1]));
  const bool cs = a[0] && Truthy(*a[0]);
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  if (items.empty()) return Value::MakeUndefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  PAGODA_ASSIGN_OR_RETURN(Value best_key, SortKey(ctx, items[0], attr, cs));
  for (size_t i = 1; i < items.size(); ++i) {
    PAGODA_ASSIGN_OR_RETURN(Value key, SortKey(ctx, items[i], attr, cs));
    PAGODA_ASSIGN_OR_RETURN(int c, Compare(key, best_key, want_max ? ">" : "<"));
    if (want_max ? c > 0 : c < 0) best = i, best_key = key;
  }
  return items[best];
}

}  // namespace

Result<Value> GetPath(Context& ctx, const Value& item, std::string_view attribute) {
  Value x = item;
  size_t start = 0;
  while (start <= attribute.size()) {
    size_t dot = attribute.find('.', start);
    if (dot == std::string_view::npos) dot = attribute.size();
    const std::string part(attribute.substr(start, dot - start));
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
    const Value key = numeric ? Value::Int(std::stoll(part.substr(0, 18))) : Value::Str(part);
    PAGODA_ASSIGN_OR_RETURN(x, GetItem(ctx, x, key));
    start = dot + 1;
  }
  return x;
}

Result<Value> Select(Context& ctx, const Value& v, const Args& a) {
  return Filtered(ctx, v, a, false, true);
}
Result<Value> Reject(Context& ctx, const Value& v, const Args& a) {
  return Filtered(ctx, v, a, false, false);
}
Result<Value> SelectAttr(Context& ctx, const Value& v, const Args& a) {
  return Filtered(ctx, v, a, true, true);
}
Result<Value> RejectAttr(Context& ctx, const Value& v, const Args& a) {
  return Filtered(ctx, v, a, true, false);
}

Result<Value> Map(Context& ctx, const Value& v, const Args& args) {
  if (!Truthy(v)) return MakeList({});  // jinja2 does not iterate a false value
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  std::vector<Value> out;
  if (args.positional.empty()) {
    PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("map", args, {"attribute", "default"}, 1));
    PAGODA_ASSIGN_OR_RETURN(std::string attr, OptionalString(a[0]));
    for (const Value& item : items) {
      PAGODA_RETURN_IF_ERROR(ctx.Step());
      PAGODA_ASSIGN_OR_RETURN(Value x, GetPath(ctx, item, attr));
      out.push_back(x.is_undefined() && a[1] ? *a[1] : x);
    }
    return MakeList(std::move(out));
  }
  if (!args.positional[0].is_string()) return InvalidArgument("map: filter name expected");
  const std::string name = args.positional[0].str();
  Args rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    PAGODA_RETURN_IF_ERROR(ctx.Step());
    PAGODA_ASSIGN_OR_RETURN(Value x, ApplyFilter(ctx, name, item, rest));
    out.push_back(std::move(x));
  }
  return MakeList(std::move(out));
}

Result<Value> Sort(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a,
                          BindArgs("sort", args, {"reverse", "case_sensitive", "attribute"}));
  PAGODA_ASSIGN_OR_RETURN(std::string attr, OptionalString(a[2]));
  const bool cs = a[1] && Truthy(*a[1]);
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  std::vector<std::pair<Value, Value>> pairs;
  for (const Value& item : items) {
    PAGODA_ASSIGN_OR_RETURN(Value key, SortKey(ctx, item, attr, cs));
    if (attr.find(',') == std::string::npos) {  // jinja2's sort keys are lists of parts
      PAGODA_ASSIGN_OR_RETURN(key, MakeList({std::move(key)}, true));
    }
    pairs.emplace_back(std::move(key), item);
  }
  PAGODA_RETURN_IF_ERROR(SortPairs(ctx, &pairs, a[0] && Truthy(*a[0])));
  std::vector<Value> out;
  for (auto& p : pairs) out.push_back(std::move(p.second));
  return MakeList(std::move(out));
}

Result<Value> DictSort(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("dictsort", args, {"case_sensitive", "by", "reverse"}));
  if (!v.is(Type::kDict)) return InvalidArgument("dictsort: a mapping is required");
  const bool cs = a[0] && Truthy(*a[0]);
  PAGODA_ASSIGN_OR_RETURN(std::string by, OptionalString(a[1]));
  if (!by.empty() && by != "key" && by != "value") {
    return InvalidArgument("You can only sort by either \"key\" or \"value\"");
  }
  PAGODA_RETURN_IF_ERROR(ctx.Work(v.dict().size() * 4));
  std::vector<std::pair<Value, Value>> pairs;
  for (const auto& [k, x] : v.dict().entries()) {
    PAGODA_ASSIGN_OR_RETURN(Value pair, MakeList({k, x}, true));
    pairs.emplace_back(IgnoreCase(by == "value" ? x : k, cs), std::move(pair));
  }
  PAGODA_RETURN_IF_ERROR(SortPairs(ctx, &pairs, a[2] && Truthy(*a[2])));
  std::vector<Value> out;
  for (auto& p : pairs) out.push_back(std::move(p.second));
  return MakeList(std::move(out));
}

Result<Value> Unique(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("unique", args, {"case_sensitive", "attribute"}));
  PAGODA_ASSIGN_OR_RETURN(std::string attr, OptionalString(a[1]));
  const bool cs = a[0] && Truthy(*a[0]);
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  PAGODA_RETURN_IF_ERROR(ctx.Work(items.size() * kDictEntryWork));
  Dict seen;
  std::vector<Value> out;
  for (const Value& item : items) {
    PAGODA_ASSIGN_OR_RETURN(Value key, SortKey(ctx, item, attr, cs));
    if (seen.Find(key) != nullptr) continue;
    PAGODA_RETURN_IF_ERROR(seen.Set(key, Value::NoneValue()));
    out.push_back(item);
  }
  return MakeList(std::move(out));
}

Result<Value> Min(Context& ctx, const Value& v, const Args& a) {
  return Aggregate(ctx, v, a, false);
}
Result<Value> Max(Context& ctx, const Value& v, const Args& a) {
  return Aggregate(ctx, v, a, true);
}

Result<Value> Sum(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("sum", args, {"attribute", "start"}));
  PAGODA_ASSIGN_OR_RETURN(std::string attr, OptionalString(a[0]));
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  Value total = a[1] ? *a[1] : Value::Int(0);
  for (const Value& item : items) {
    PAGODA_RETURN_IF_ERROR(ctx.Step());
    Value x = item;
    if (!attr.empty()) {
      PAGODA_ASSIGN_OR_RETURN(x, GetPath(ctx, item, attr));
    }
    PAGODA_ASSIGN_OR_RETURN(total, BinaryOp(ctx, "+", total, x));
  }
  return total;
}

Result<Value> GroupBy(Context& ctx, const Value& v, const Args& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a,
                          BindArgs("groupby", args, {"attribute", "default", "case_sensitive"}, 1));
  PAGODA_ASSIGN_OR_RETURN(Text attr_text, ToText(*a[0]));
  const std::string attr = attr_text.str();
  const bool cs = a[2] && Truthy(*a[2]);
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx, v));
  std::vector<std::pair<Value, Value>> pairs;
  for (const Value& item : items) {
    PAGODA_ASSIGN_OR_RETURN(Value x, GetPath(ctx, item, attr));
    if (x.is_undefined() && a[1]) x = *a[1];
    pairs.emplace_back(IgnoreCase(x, cs), item);
  }
  PAGODA_RETURN_IF_ERROR(SortPairs(ctx, &pairs, false));
  std::vector<Value> groups;
  for (size_t i = 0; i < pairs.size();) {
    size_t j = i;
    std::vector<Value> members;
    while (j < pairs.size() && Equals(pairs[j].first, pairs[i].first)) {
      members.push_back(pairs[j++].second);
    }
    PAGODA_ASSIGN_OR_RETURN(Value grouper, GetPath(ctx, members[0], attr));
    if (grouper.is_undefined() && a[1]) grouper = *a[1];
    PAGODA_ASSIGN_OR_RETURN(Value list, MakeList(std::move(members)));
    PAGODA_ASSIGN_OR_RETURN(Value group, MakeList({cs ? pairs[i].first : grouper, list}, true));
    groups.push_back(std::move(group));
    i = j;
  }
  return MakeList(std::move(groups));
}

}  // namespace pagoda::jinja
