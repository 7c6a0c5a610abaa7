// Objects: properties in schema order, each optional one omissible (linear-size rules, not one
// alternative per subset), `required`, and additional properties after the listed ones, whose
// keys can never spell a listed key (a duplicate key would override a listed value).
#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "scheduler/grammar/gbnf_text.h"
#include "scheduler/grammar/json_schema_internal.h"

namespace pagoda::grammar::schema {
namespace {

using SchemaList = std::vector<std::pair<const Json*, std::string>>;

// What one part says about keys outside its `properties`.
enum class Extra { kAllow, kForbid, kSchema };

Extra ExtraOf(const Part& part, bool strict_default) {
  auto it = part.schema->find("additionalProperties");
  if (it == part.schema->end()) return strict_default ? Extra::kForbid : Extra::kAllow;
  if (it->is_boolean()) return it->get<bool>() ? Extra::kAllow : Extra::kForbid;
  return Extra::kSchema;
}

struct Member {
  std::string key;
  bool required = false;
  bool forbidden = false;
  SchemaList schemas;  // all must hold
};

struct Plan {
  std::vector<Member> members;  // listed keys in order, then required keys not listed
  bool extras = true;           // keys outside every `properties` allowed
  SchemaList extra_schemas;
};

// Each part's `properties`, indexed (ordered_json looks keys up one by one).
using PropertyIndex = std::vector<std::unordered_map<std::string_view, const Json*>>;

Status ReadLists(const Conj& conj, std::vector<std::string>& keys,
                 std::unordered_set<std::string>& required, PropertyIndex& index) {
  std::unordered_set<std::string> seen;
  std::vector<std::string> required_order;
  for (const Part& p : conj) {
    index.emplace_back();
    if (auto it = p.schema->find("properties"); it != p.schema->end()) {
      if (!it->is_object()) {
        return InvalidArgument(At("properties", p.pointer) + " must be an object");
      }
      for (const auto& [key, value] : it->items()) {
        index.back().emplace(key, &value);
        if (seen.insert(key).second) keys.push_back(key);
      }
    }
    if (auto it = p.schema->find("required"); it != p.schema->end()) {
      if (!it->is_array()) return InvalidArgument(At("required", p.pointer) + " must be an array");
      for (const Json& k : *it) {
        if (!k.is_string()) {
          return InvalidArgument(At("required", p.pointer) + " must list strings");
        }
        std::string name = k.get<std::string>();
        if (required.insert(name).second) required_order.push_back(std::move(name));
      }
    }
  }
  for (const std::string& r : required_order) {
    if (seen.insert(r).second) keys.push_back(r);  // required but listed nowhere
  }
  return Status::Ok();
}

// For one key: the schemas every part imposes on its value, or `forbidden`.
void FillMember(const Conj& conj, const PropertyIndex& index, Member& m) {
  for (size_t i = 0; i < conj.size(); ++i) {
    const Part& p = conj[i];
    if (auto it = index[i].find(m.key); it != index[i].end()) {
      const Json& s = *it->second;
      if (s.is_boolean() && !s.get<bool>()) m.forbidden = true;
      m.schemas.emplace_back(&s, Child(Child(p.pointer, "properties"), m.key));
      continue;
    }
    auto extra = p.schema->find("additionalProperties");
    if (extra == p.schema->end()) continue;  // (strict mode only limits keys listed nowhere)
    if (extra->is_boolean()) {
      m.forbidden |= !extra->get<bool>();
    } else {
      m.schemas.emplace_back(&*extra, Child(p.pointer, "additionalProperties"));
    }
  }
}

Result<Plan> MakePlan(const Conj& conj, bool strict) {
  std::vector<std::string> keys;
  std::unordered_set<std::string> required;
  PropertyIndex index;
  PAGODA_RETURN_IF_ERROR(ReadLists(conj, keys, required, index));
  Plan plan;
  for (const std::string& key : keys) {
    Member m;
    m.key = key;
    m.required = required.contains(key);
    FillMember(conj, index, m);
    if (m.forbidden && m.required) {
      return Unsatisfiable("required property '" + key + "' at " +
                           (conj[0].pointer.empty() ? "/" : conj[0].pointer) +
                           " is forbidden (false schema or additionalProperties false)");
    }
    if (!m.forbidden) plan.members.push_back(std::move(m));
  }
  for (const Part& p : conj) {
    const Extra e = ExtraOf(p, strict);
    if (e == Extra::kForbid) plan.extras = false;
    if (e == Extra::kSchema) {
      plan.extra_schemas.emplace_back(&p.schema->at("additionalProperties"),
                                      Child(p.pointer, "additionalProperties"));
    }
  }
  return plan;
}

// A trie over the listed keys (code points), nodes in creation order (parents first).
struct KeyTrie {
  struct Node {
    std::map<char32_t, size_t> children;
    bool is_key = false;
  };
  std::vector<Node> nodes{Node{}};

  void Insert(std::u32string_view key) {
    size_t at = 0;
    for (char32_t c : key) {
      auto it = nodes[at].children.find(c);
      if (it == nodes[at].children.end()) {
        nodes.push_back(Node{});
        it = nodes[at].children.emplace(c, nodes.size() - 1).first;
      }
      at = it->second;
    }
    nodes[at].is_key = true;
  }
};

bool PlainKey(std::u32string_view key) {
  return std::none_of(key.begin(), key.end(),
                      [](char32_t c) { return c < 0x20 || c == '"' || c == '\\'; });
}

// The key of an additional property: a JSON string without escapes that is none of `listed`
// (keys with escapes or specials cannot collide: such a key is never produced here).
std::string ExtraKeyRule(Compiler& c, const std::string& hint,
                         const std::vector<std::string>& listed) {
  gbnf::RuleSet& rules = c.rules();
  const std::string plain = rules.Use(gbnf::Primitive::kPlainChar);
  KeyTrie trie;
  for (const std::string& k : listed) {
    Result<std::u32string> cps = gbnf::Utf8ToCodepoints(k);
    if (cps.ok() && PlainKey(*cps)) trie.Insert(*cps);
  }
  const std::vector<gbnf::CpRange> all_plain =
      gbnf::ComplementRanges(gbnf::NormalizeRanges({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}));
  std::vector<std::string> names(trie.nodes.size());
  for (size_t i = trie.nodes.size(); i-- > 0;) {  // children before parents
    const KeyTrie::Node& node = trie.nodes[i];
    std::vector<std::string> alts;
    std::vector<gbnf::CpRange> used;
    for (const auto& [ch, child] : node.children) {
      alts.push_back(gbnf::GbnfLiteral(std::u32string(1, ch)) + " " + names[child]);
      used.push_back({static_cast<uint32_t>(ch), static_cast<uint32_t>(ch)});
    }
    std::vector<gbnf::CpRange> others = all_plain;
    if (!used.empty()) {
      others = gbnf::ComplementRanges(gbnf::NormalizeRanges(used));
      std::vector<gbnf::CpRange> both;
      for (const gbnf::CpRange& a : others) {
        for (const gbnf::CpRange& b : all_plain) {
          if (std::max(a.lo, b.lo) <= std::min(a.hi, b.hi)) {
            both.push_back({std::max(a.lo, b.lo), std::min(a.hi, b.hi)});
          }
        }
      }
      others = gbnf::NormalizeRanges(std::move(both));
    }
    if (!others.empty()) alts.push_back(gbnf::GbnfClass(others) + " " + plain + "*");
    std::string body;
    for (const std::string& a : alts) body += (body.empty() ? "" : " | ") + a;
    if (body.empty()) body = "\"\"";
    if (!node.is_key) body = "( " + body + " )?";
    names[i] = rules.Add(hint + "-xkey", std::move(body));
  }
  return names[0];
}

// "{" members "}" where optional members may be left out: R(i) is "the members from i on, after
// at least one was written" (each with its comma), F(i) "from i on, none written yet". Built
// from the end; R(i+1) becomes a rule when an optional member i needs it twice.
std::string ObjectBody(Compiler& c, const std::string& hint, const std::vector<std::string>& kvs,
                       const std::vector<bool>& required, const std::string& extra_kv) {
  const std::string comma = "\",\" " + c.Space() + " ";
  std::string rest = extra_kv.empty() ? "" : "( " + comma + extra_kv + " )*";
  std::vector<std::string> firsts;  // F(i)'s alternatives, last first
  if (!extra_kv.empty()) firsts.push_back(extra_kv + " " + rest);
  bool can_be_empty = true;
  for (size_t i = kvs.size(); i-- > 0;) {
    if (required[i]) {
      if (rest.size() > 1024) rest = c.rules().Add(hint + "-rest", rest);  // no quadratic copies
      firsts = {kvs[i] + (rest.empty() ? "" : " " + rest)};
      rest = comma + kvs[i] + (rest.empty() ? "" : " " + rest);
      can_be_empty = false;
      continue;
    }
    const std::string ref = rest.empty() ? "" : c.rules().Add(hint + "-rest", rest);
    firsts.push_back(kvs[i] + (ref.empty() ? "" : " " + ref));
    rest = "( " + comma + kvs[i] + " )?" + (ref.empty() ? "" : " " + ref);
  }
  if (firsts.empty()) return "";
  std::string body = "(";
  for (size_t i = firsts.size(); i-- > 0;) {
    body += (i + 1 == firsts.size() ? " " : " | ") + firsts[i];
  }
  return body + " )" + (can_be_empty ? "?" : "");
}

}  // namespace

Result<std::string> Compiler::VisitObject(const Conj& conj, const std::string& hint, int depth) {
  PAGODA_ASSIGN_OR_RETURN(Plan plan, MakePlan(conj, opts_.strict));
  const std::string sp = Space();
  ConsumedGuard consumed(*this);
  std::vector<std::string> kvs, listed;
  std::vector<bool> required;
  for (const Member& m : plan.members) {
    listed.push_back(m.key);
    PAGODA_ASSIGN_OR_RETURN(const std::string value,
                            VisitAll(m.schemas, hint + "-" + m.key, depth + 1));
    Result<std::u32string> key = gbnf::Utf8ToCodepoints(Json(m.key).dump());
    if (!key.ok()) return key.status().WithPrefix("property name");
    kvs.push_back(rules_.Add(hint + "-" + m.key + "-kv",
                             gbnf::GbnfLiteral(*key) + " " + sp + " \":\" " + sp + " " + value));
    required.push_back(m.required);
  }
  std::string extra_kv;
  if (plan.extras) {
    for (const Part& p : conj) {  // keys some part lists but forbids stay excluded too
      if (auto it = p.schema->find("properties"); it != p.schema->end()) {
        for (const auto& [key, value] : it->items()) listed.push_back(key);
      }
    }
    PAGODA_ASSIGN_OR_RETURN(const std::string value,
                            VisitAll(plan.extra_schemas, hint + "-extra", depth + 1));
    const std::string key = "\"\\\"\" " + ExtraKeyRule(*this, hint, listed) + " \"\\\"\" " + sp;
    extra_kv = rules_.Add(hint + "-extra-kv", key + " \":\" " + sp + " " + value);
  }
  const std::string body = ObjectBody(*this, hint, kvs, required, extra_kv);
  return rules_.Add(hint, "\"{\" " + sp + (body.empty() ? "" : " " + body) + " \"}\" " + sp);
}

}  // namespace pagoda::grammar::schema
