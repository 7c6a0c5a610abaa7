#include "model/chat/jinja.h"

#include <algorithm>
#include <utility>

#include "model/chat/jinja_ast.h"
#include "model/chat/jinja_context.h"
#include "model/chat/jinja_eval.h"
#include "model/chat/jinja_json.h"
#include "model/chat/jinja_parser.h"
#include "model/chat/jinja_scopes.h"

namespace pagoda::jinja {

struct Program {
  Body body;
  std::vector<std::string> missing;  // the template frame's (jinja_scopes.h)
};

namespace {

// Segments from the content ranges of the rendered text.
std::vector<Segment> Segments(const Text& out) {
  std::vector<Segment> segs;
  size_t at = 0;
  auto add = [&](SegmentKind kind, size_t end) {
    if (end > at) segs.push_back({kind, at, end - at});
    at = end;
  };
  for (const Span& s : out.content()) {
    add(SegmentKind::kTemplate, s.begin);
    add(SegmentKind::kContent, s.end);
  }
  add(SegmentKind::kTemplate, out.size());
  return segs;
}

Result<ScopePtr> RootScope(const nlohmann::ordered_json& variables, const RenderOptions& options) {
  if (!variables.is_object()) return InvalidArgument("chat template variables must be an object");
  auto root = std::make_shared<Scope>();
  root->Set("tools", Value::NoneValue());
  root->Set("documents", Value::NoneValue());
  for (const auto& [name, json] : variables.items()) {
    const auto& trusted = options.template_variables;
    const bool content = std::find(trusted.begin(), trusted.end(), name) == trusted.end();
    auto v = ValueFromJson(json, content, options.template_keys);
    if (!v.ok()) return v.status().WithPrefix("variable '" + name + "'");
    root->Set(name, std::move(v).value());
  }
  return root;
}

}  // namespace

Result<Template> Template::Parse(std::string_view source) {
  PAGODA_ASSIGN_OR_RETURN(Body body, ParseTemplate(source));
  auto program = std::make_shared<Program>();
  program->body = std::move(body);
  program->missing = AnalyzeScopes(program->body);
  return Template(std::move(program));
}

Result<Rendered> Template::Render(const nlohmann::ordered_json& variables,
                                  const RenderOptions& options) const {
  PAGODA_ASSIGN_OR_RETURN(ScopePtr root, RootScope(variables, options));
  root->SetMissing(program_->missing);
  Context ctx(options);
  Evaluator evaluator(ctx, root);
  Text out;
  auto flow = evaluator.ExecBody(program_->body, root, &out);
  root->vars.clear();  // macros' closures point here; values drop before the context ends
  if (!flow.ok()) return flow.status();
  Rendered r;
  r.segments = Segments(out);
  r.text = out.str();
  return r;
}

}  // namespace pagoda::jinja
