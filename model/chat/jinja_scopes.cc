#include "model/chat/jinja_scopes.h"

#include <map>
#include <set>

namespace pagoda::jinja {
namespace {

enum class Load { kParam, kResolve, kAlias, kUndefined };

// One frame's symbol table (jinja2's idtracking.Symbols).
struct Symbols {
  const Symbols* parent = nullptr;
  std::map<std::string, Load> refs;
  std::set<std::string> stores;

  bool FindRef(const std::string& name) const {
    for (const Symbols* s = this; s != nullptr; s = s->parent) {
      if (s->refs.count(name)) return true;
    }
    return false;
  }
  void LoadName(const std::string& name) {
    if (!FindRef(name)) refs[name] = Load::kResolve;
  }
  void Store(const std::string& name) {
    stores.insert(name);
    if (refs.count(name)) return;
    refs[name] = (parent && parent->FindRef(name)) ? Load::kAlias : Load::kUndefined;
  }
  void Param(const std::string& name) {
    stores.insert(name);
    refs[name] = Load::kParam;
  }
  // After the branches of an if: a name assigned in only some of them is resolved from
  // outside at frame entry.
  void BranchUpdate(const std::vector<Symbols>& branches) {
    std::map<std::string, size_t> counts;
    for (const Symbols& b : branches) {
      for (const std::string& t : b.stores) {
        if (!stores.count(t)) ++counts[t];
      }
    }
    for (const Symbols& b : branches) {
      for (const auto& [k, v] : b.refs) refs[k] = v;
      stores.insert(b.stores.begin(), b.stores.end());
    }
    for (const auto& [name, n] : counts) {
      if (n == branches.size()) continue;
      refs[name] = (parent && parent->FindRef(name)) ? Load::kAlias : Load::kResolve;
    }
  }
  std::vector<std::string> Missing() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : refs) {
      if (v == Load::kUndefined) out.push_back(k);
    }
    return out;
  }
};

void VisitExpr(const Expr* e, Symbols& s) {
  if (e == nullptr) return;
  if (e->kind == ExprKind::kName) s.LoadName(e->name);
  for (const ExprPtr& x : e->items) VisitExpr(x.get(), s);
  for (const ExprPtr& x : e->args.positional) VisitExpr(x.get(), s);
  for (const auto& kv : e->args.keyword) VisitExpr(kv.second.get(), s);
  VisitExpr(e->args.star_args.get(), s);
  VisitExpr(e->args.star_kwargs.get(), s);
}

void StoreTarget(const Target& t, Symbols& s) {
  if (!t.attr.empty()) {
    s.LoadName(t.names[0]);
    return;
  }
  for (const std::string& n : t.names) s.Store(n);
}

void VisitStmt(const Stmt& st, Symbols& s);

void VisitBody(const Body& body, Symbols& s) {
  for (const StmtPtr& st : body) VisitStmt(*st, s);
}

// An elif: in jinja2 a nested if (with no elif / else of its own) in the elif branch.
void VisitElif(const Expr& test, const Body& body, Symbols& s) {
  VisitExpr(&test, s);
  std::vector<Symbols> branches(3, s);
  VisitBody(body, branches[0]);
  s.BranchUpdate(branches);
}

void VisitIf(const Stmt& st, Symbols& s) {
  VisitExpr(st.exprs[0].get(), s);
  std::vector<Symbols> branches(3, s);  // body, elifs, else
  VisitBody(st.bodies[0], branches[0]);
  for (size_t i = 1; i < st.exprs.size(); ++i) VisitElif(*st.exprs[i], st.bodies[i], branches[1]);
  if (st.bodies.size() > st.exprs.size()) VisitBody(st.bodies.back(), branches[2]);
  s.BranchUpdate(branches);
}

// What a statement does to the symbols of the frame it is in (nested frames excluded).
void VisitStmt(const Stmt& st, Symbols& s) {
  switch (st.kind) {
    case StmtKind::kOutput:
    case StmtKind::kFor:
    case StmtKind::kCallBlock:
    case StmtKind::kFilterBlock:
      VisitExpr(st.exprs.empty() ? nullptr : st.exprs[0].get(), s);
      return;
    case StmtKind::kIf:
      VisitIf(st, s);
      return;
    case StmtKind::kSet:
      VisitExpr(st.exprs[0].get(), s);
      StoreTarget(st.target, s);
      return;
    case StmtKind::kSetBlock:
      StoreTarget(st.target, s);
      return;
    case StmtKind::kMacro:
      s.Store(st.macro->name);
      return;
    case StmtKind::kWith:
      for (const ExprPtr& e : st.exprs) VisitExpr(e.get(), s);
      return;
    default:
      return;
  }
}

void AnalyzeNested(Body& body, const Symbols& parent);

// A frame whose statements are `body`, with `params` declared first.
std::vector<std::string> AnalyzeFrame(Body& body, const Symbols& parent,
                                      const std::vector<std::string>& params,
                                      const std::vector<const Expr*>& loads) {
  Symbols s;
  s.parent = &parent;
  for (const std::string& p : params) s.Param(p);
  for (const Expr* e : loads) VisitExpr(e, s);
  VisitBody(body, s);
  AnalyzeNested(body, s);
  return s.Missing();
}

std::vector<std::string> AnalyzeMacro(MacroDef& m, const Symbols& parent) {
  std::vector<const Expr*> defaults;
  for (const ExprPtr& d : m.defaults) defaults.push_back(d.get());
  m.missing = AnalyzeFrame(m.body, parent, m.params, defaults);
  return m.missing;
}

// The frames nested in `body` (whose own symbols are complete): annotates each.
void AnalyzeNested(Body& body, const Symbols& parent) {
  for (StmtPtr& st : body) {
    st->frame_missing.clear();
    switch (st->kind) {
      case StmtKind::kIf:
        for (Body& b : st->bodies) AnalyzeNested(b, parent);
        break;
      case StmtKind::kFor:
        st->frame_missing.push_back(AnalyzeFrame(st->bodies[0], parent, st->target.names, {}));
        st->frame_missing.push_back(AnalyzeFrame(st->bodies[1], parent, {}, {}));
        break;
      case StmtKind::kSetBlock:
      case StmtKind::kBlock:
        st->frame_missing.push_back(AnalyzeFrame(st->bodies[0], parent, {}, {}));
        break;
      case StmtKind::kFilterBlock:
        st->frame_missing.push_back(AnalyzeFrame(st->bodies[0], parent, {}, {}));
        break;
      case StmtKind::kWith:
        st->frame_missing.push_back(AnalyzeFrame(st->bodies[0], parent, st->with_names, {}));
        break;
      case StmtKind::kMacro:
      case StmtKind::kCallBlock:
        AnalyzeMacro(*st->macro, parent);
        break;
      default:
        break;
    }
  }
}

}  // namespace

std::vector<std::string> AnalyzeScopes(Body& root) {
  Symbols s;
  VisitBody(root, s);
  AnalyzeNested(root, s);
  return s.Missing();
}

}  // namespace pagoda::jinja
