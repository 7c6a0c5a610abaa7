// Arrays: prefixItems (or draft-4 `items` lists with additionalItems) for the first positions,
// `items` for the rest, minItems / maxItems as bounded repetition.
#include <algorithm>
#include <string>
#include <vector>

#include "scheduler/grammar/json_schema_internal.h"

namespace pagoda::grammar::schema {
namespace {

using SchemaList = std::vector<std::pair<const Json*, std::string>>;

// One part's view: schemas for the first positions, and for every later position.
struct PartItems {
  const Json* tuple = nullptr;
  std::string tuple_pointer;
  const Json* rest = nullptr;  // nullptr: any value
  std::string rest_pointer;
};

struct ItemPlan {
  std::vector<SchemaList> prefix;
  std::vector<bool> prefix_forbidden;
  SchemaList rest;
  bool rest_forbidden = false;
  int64_t min = 0;
  int64_t max = -1;  // -1: no maxItems
};

Result<PartItems> ReadPart(const Part& p) {
  const Json& s = *p.schema;
  PartItems out;
  auto prefix = s.find("prefixItems");
  auto items = s.find("items");
  const bool draft4_tuple = prefix == s.end() && items != s.end() && items->is_array();
  if (prefix != s.end() || draft4_tuple) {
    out.tuple = prefix != s.end() ? &*prefix : &*items;
    out.tuple_pointer = Child(p.pointer, prefix != s.end() ? "prefixItems" : "items");
    if (!out.tuple->is_array()) {
      return InvalidArgument(At("prefixItems", p.pointer) + " must be an array");
    }
    items = draft4_tuple ? s.find("additionalItems") : items;
  }
  if (items != s.end()) {
    out.rest = &*items;
    out.rest_pointer = Child(p.pointer, draft4_tuple ? "additionalItems" : "items");
    if (!out.rest->is_object() && !out.rest->is_boolean()) {
      return InvalidArgument(At(draft4_tuple ? "additionalItems" : "items", p.pointer) +
                             " must be a schema");
    }
  }
  return out;
}

// A schema for one position: false forbids it, true adds nothing.
void AddSchema(const Json* s, const std::string& pointer, SchemaList& list, bool& forbidden) {
  if (s == nullptr) return;
  if (s->is_boolean()) {
    forbidden |= !s->get<bool>();
    return;
  }
  list.emplace_back(s, pointer);
}

Result<ItemPlan> MakePlan(const Conj& conj) {
  std::vector<PartItems> parts;
  size_t k = 0;
  ItemPlan plan;
  for (const Part& p : conj) {
    PAGODA_ASSIGN_OR_RETURN(PartItems items, ReadPart(p));
    if (items.tuple != nullptr) k = std::max(k, items.tuple->size());
    parts.push_back(std::move(items));
    if (auto it = p.schema->find("minItems"); it != p.schema->end()) {
      PAGODA_ASSIGN_OR_RETURN(const int64_t v, CountKeyword(*it, "minItems", p.pointer));
      plan.min = std::max(plan.min, v);
    }
    if (auto it = p.schema->find("maxItems"); it != p.schema->end()) {
      PAGODA_ASSIGN_OR_RETURN(const int64_t v, CountKeyword(*it, "maxItems", p.pointer));
      plan.max = plan.max < 0 ? v : std::min(plan.max, v);
    }
  }
  plan.prefix.resize(k);
  plan.prefix_forbidden.resize(k);
  for (const PartItems& items : parts) {
    const size_t n = items.tuple == nullptr ? 0 : items.tuple->size();
    for (size_t i = 0; i < k; ++i) {
      bool forbidden = false;
      if (i < n) {
        AddSchema(&(*items.tuple)[i], Child(items.tuple_pointer, std::to_string(i)), plan.prefix[i],
                  forbidden);
      } else {
        AddSchema(items.rest, items.rest_pointer, plan.prefix[i], forbidden);
      }
      if (forbidden) plan.prefix_forbidden[i] = true;
    }
    AddSchema(items.rest, items.rest_pointer, plan.rest, plan.rest_forbidden);
  }
  return plan;
}

}  // namespace

Result<std::string> Compiler::VisitArray(const Conj& conj, const std::string& hint, int depth) {
  PAGODA_ASSIGN_OR_RETURN(const ItemPlan plan, MakePlan(conj));
  const int64_t k = static_cast<int64_t>(plan.prefix.size());
  int64_t hi = plan.max;
  const int64_t lo = plan.min;
  auto cap = [&hi](int64_t v) { hi = hi < 0 ? v : std::min(hi, v); };
  if (plan.rest_forbidden) cap(k);
  for (int64_t i = 0; i < k; ++i) {
    if (plan.prefix_forbidden[static_cast<size_t>(i)]) {
      cap(i);
      break;
    }
  }
  const std::string where = conj[0].pointer.empty() ? "/" : conj[0].pointer;
  if (hi >= 0 && lo > hi) {
    return Unsatisfiable("minItems " + std::to_string(lo) + " at " + where +
                         " is more than the items allow (" + std::to_string(hi) + ")");
  }
  const std::string sp = Space();
  ConsumedGuard consumed(*this);
  const int64_t m = hi < 0 ? k : std::min(k, hi);
  std::vector<std::string> elems;
  for (int64_t i = 0; i < m; ++i) {
    PAGODA_ASSIGN_OR_RETURN(std::string e, VisitAll(plan.prefix[static_cast<size_t>(i)],
                                                    hint + "-" + std::to_string(i), depth + 1));
    elems.push_back(std::move(e));
  }
  std::string item;
  if (hi < 0 || hi > k) {
    PAGODA_ASSIGN_OR_RETURN(item, VisitAll(plan.rest, hint + "-item", depth + 1));
  }
  const std::string body =
      ArrayBody(hint, elems, item, k, lo, hi, "minItems / maxItems at " + where);
  return rules_.Add(hint, "\"[\" " + sp + (body.empty() ? "" : " " + body) + " \"]\" " + sp);
}

// Positions 0..m-1 have their own element rules, later ones share `item`; lo..hi elements.
std::string Compiler::ArrayBody(const std::string& hint, const std::vector<std::string>& elems,
                                const std::string& item, int64_t k, int64_t lo, int64_t hi,
                                const std::string& what) {
  const std::string comma = "\",\" " + Space() + " ";
  const auto join = [](const std::string& a, const std::string& b) {
    return a.empty() ? b : b.empty() ? a : a + " " + b;
  };
  const int64_t m = static_cast<int64_t>(elems.size());
  if (m == 0) {  // no positional schemas (k == 0), or none allowed
    if (hi == 0 || item.empty()) return "";
    const std::string more = rules_.Repeat("( " + comma + item + " )", std::max<int64_t>(lo - 1, 0),
                                           hi < 0 ? -1 : hi - 1, what);
    return lo == 0 ? "( " + join(item, more) + " )?" : join(item, more);
  }
  std::string tail;  // positions m.. after position m-1
  if (m == k && !item.empty()) {
    tail = rules_.Repeat("( " + comma + item + " )", std::max<int64_t>(lo - k, 0),
                         hi < 0 ? -1 : hi - k, what);
  }
  for (int64_t i = m - 1; i >= 1; --i) {
    const std::string& e = elems[static_cast<size_t>(i)];
    if (i < lo) {
      tail = join(comma + e, tail);
    } else {
      const std::string ref = tail.empty() ? "" : rules_.Add(hint + "-tail", tail);
      tail = "( " + join(comma + e, ref) + " )?";
    }
  }
  const std::string first = join(elems[0], tail);
  return lo >= 1 ? first : "( " + first + " )?";
}

}  // namespace pagoda::grammar::schema
