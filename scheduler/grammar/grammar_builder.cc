// Parsed rules to a Grammar (grammar_rules.h): the checks that need every rule (root present,
// no undefined rule, no left recursion), then the flat layout and the start state.
#include <algorithm>

#include "scheduler/grammar/grammar_rules.h"

namespace pagoda::grammar::internal {
namespace {

// nullable[r]: rule r can match the empty string. Linear worklist: an alternative becomes
// nullable when its last not-yet-nullable symbol does.
std::vector<bool> Nullable(const RuleSet& set) {
  const size_t n = set.rules.size();
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> uses(n);  // rule -> (rule, alt)
  std::vector<std::vector<uint32_t>> pending(n);  // rule, alt -> symbols still to become nullable
  std::vector<bool> nullable(n, false);
  std::vector<uint32_t> work;
  for (uint32_t r = 0; r < n; ++r) {
    const auto& alts = set.rules[r].alts;
    pending[r].assign(alts.size(), 0);
    for (uint32_t a = 0; a < alts.size(); ++a) {
      bool has_bytes = false;
      for (const Sym& s : alts[a]) {
        if (!s.is_rule)
          has_bytes = true;
        else
          uses[s.id].push_back({r, a});
      }
      pending[r][a] = has_bytes ? UINT32_MAX : static_cast<uint32_t>(alts[a].size());
      if (pending[r][a] == 0 && !nullable[r]) {
        nullable[r] = true;
        work.push_back(r);
      }
    }
  }
  while (!work.empty()) {
    const uint32_t s = work.back();
    work.pop_back();
    for (auto [r, a] : uses[s]) {
      if (pending[r][a] == UINT32_MAX || --pending[r][a] != 0 || nullable[r]) continue;
      nullable[r] = true;
      work.push_back(r);
    }
  }
  return nullable;
}

// The rules each rule can start with (reach before matching a byte).
std::vector<std::vector<uint32_t>> LeftEdges(const RuleSet& set,
                                             const std::vector<bool>& nullable) {
  std::vector<std::vector<uint32_t>> edges(set.rules.size());
  for (size_t r = 0; r < set.rules.size(); ++r) {
    for (const auto& alt : set.rules[r].alts) {
      for (const Sym& s : alt) {
        if (!s.is_rule) break;
        edges[r].push_back(s.id);
        if (!nullable[s.id]) break;
      }
    }
  }
  return edges;
}

std::string Describe(const RuleDef& rule) {
  if (rule.generated_for.empty()) return "rule '" + rule.name + "'";
  const std::string owner = rule.name.substr(0, rule.name.find('~'));
  return rule.generated_for + " in rule '" + owner + "'";
}

// Iterative DFS for a cycle of LeftEdges; returns a rule on it (a named one if any), or -1.
int64_t FindLeftRecursion(const std::vector<std::vector<uint32_t>>& edges, const RuleSet& set) {
  std::vector<uint8_t> color(edges.size(), 0);    // 0 new, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> path;  // rule, next edge
  for (uint32_t root = 0; root < edges.size(); ++root) {
    if (color[root] != 0) continue;
    path.push_back({root, 0});
    color[root] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == edges[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t s = edges[r][next++];
      if (color[s] == 0) {
        color[s] = 1;
        path.push_back({s, 0});
      } else if (color[s] == 1) {
        size_t k = path.size();
        while (path[k - 1].first != s) --k;
        for (size_t i = k - 1; i < path.size(); ++i) {
          if (set.rules[path[i].first].generated_for.empty()) return path[i].first;
        }
        return s;
      }
    }
  }
  return -1;
}

Status CheckRules(std::string_view text, const RuleSet& set) {
  bool has_root = false;
  for (const RuleDef& rule : set.rules) {
    if (!rule.defined) {
      return InvalidArgument(LineCol(text, rule.where) + ": undefined rule '" + rule.name + "'");
    }
    has_root = has_root || rule.name == "root";
  }
  if (!has_root) return InvalidArgument("the grammar has no 'root' rule");
  const int64_t rec = FindLeftRecursion(LeftEdges(set, Nullable(set)), set);
  if (rec >= 0) {
    const RuleDef& rule = set.rules[static_cast<size_t>(rec)];
    return InvalidArgument(LineCol(text, rule.where) + ": left recursion: " + Describe(rule) +
                           " can reach itself without matching a character (a repeated item "
                           "that can be empty also does)");
  }
  return Status::Ok();
}

void Flatten(const RuleSet& set, Grammar* g) {
  g->byte_sets = set.byte_sets;
  g->alt_begin.push_back(0);
  for (const RuleDef& rule : set.rules) {
    for (const auto& alt : rule.alts) {
      g->alt_starts.push_back(static_cast<uint32_t>(g->elems.size()));
      for (const Sym& s : alt) {
        g->elems.push_back({s.is_rule ? ElemKind::kRule : ElemKind::kBytes, s.id});
      }
      g->elems.push_back({ElemKind::kEnd, 0});
    }
    g->alt_begin.push_back(static_cast<uint32_t>(g->alt_starts.size()));
    g->rule_names.push_back(rule.name);
    if (rule.name == "root") g->root = static_cast<uint32_t>(g->rule_names.size() - 1);
  }
}

}  // namespace

std::string LineCol(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return "line " + std::to_string(line) + " col " + std::to_string(offset - line_start + 1);
}

Result<std::shared_ptr<const Grammar>> BuildGrammar(std::string_view text, RuleSet set,
                                                    const GrammarLimits& limits) {
  PAGODA_RETURN_IF_ERROR(CheckRules(text, set));
  auto g = std::make_shared<Grammar>();
  g->limits = limits;
  Flatten(set, g.get());
  StepScratch scratch;
  if (!StartSet(*g, scratch, &g->start)) {
    return InvalidArgument("the grammar's start needs more than max_stacks (" +
                           std::to_string(limits.max_stacks) +
                           ") parse stacks or max_advance_steps; simplify its alternatives");
  }
  return std::shared_ptr<const Grammar>(std::move(g));
}

}  // namespace pagoda::grammar::internal
