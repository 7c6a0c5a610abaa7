// `pagoda render-template`: renders a chat template -- a model's (GGUF tokenizer.chat_template
// or the HF directory's tokenizer_config.json / chat_template.jinja) or a template file -- over
// the variables of a JSON file, exactly as Hugging Face's apply_chat_template does, with the
// renderer of model/chat/jinja.h. A debugging aid for chat templates.
//
// The variables file holds what apply_chat_template passes: messages, add_generation_prompt,
// bos_token, eos_token, tools, documents and any extra keyword (enable_thinking, ...); with
// --model, bos_token / eos_token default to the model's special tokens.
// Output: the rendered prompt exactly (no newline added), or with --json
// {"text", "segments": [{"kind": "template" | "content", "offset", "length", "text"}],
//  "token_ids" (with --model: as the server tokenizes a chat prompt -- special tokens only in
//  template segments, BOS added unless the template wrote it; server/api_request.h)}.
// Exit status: 0; 1 when the template fails (raise_exception's message, or the syntax or
// runtime error, on stderr); 2 for bad arguments or unreadable files.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "model/chat/jinja.h"
#include "model/model.h"
#include "server/api_request.h"
#include "tools/commands.h"

namespace pagoda::cli {
namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kMaxInputBytes = 256 << 20;

struct RenderTemplateArgs {
  std::string model;
  std::string template_file;
  std::string vars_file;
  std::string now;
  bool json = false;
};

struct Loaded {
  std::string template_text;
  std::unique_ptr<Model> model;  // with --model
  Json vars;
  jinja::RenderOptions options;
};

Result<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(std::string(what) + " " + path + ": cannot open");
  std::string text(std::istreambuf_iterator<char>(in), {});
  if (text.size() > kMaxInputBytes) return InvalidArgument(std::string(what) + " too large");
  return text;
}

Result<Json> ReadVars(const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(std::string text, ReadFile(path, "--vars"));
  Json vars = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (vars.is_discarded()) return InvalidArgument("--vars " + path + ": not valid JSON");
  if (!vars.is_object()) return InvalidArgument("--vars " + path + ": expected a JSON object");
  return vars;
}

// The model's special tokens as apply_chat_template passes them, unless the file sets them.
void AddSpecialTokens(const Tokenizer& tok, Json* vars) {
  if (!vars->contains("bos_token") && tok.bos_id() >= 0) {
    (*vars)["bos_token"] = std::string(tok.Piece(tok.bos_id()));
  }
  if (!vars->contains("eos_token") && tok.eos_id() >= 0) {
    (*vars)["eos_token"] = std::string(tok.Piece(tok.eos_id()));
  }
}

Result<Loaded> Load(const RenderTemplateArgs& args) {
  if (args.model.empty() == args.template_file.empty()) {
    return InvalidArgument("give exactly one of --model and --template");
  }
  Loaded l;
  PAGODA_ASSIGN_OR_RETURN(l.vars, ReadVars(args.vars_file));
  if (!args.now.empty()) {
    auto now = jinja::ParseCivilTime(args.now);
    if (!now.ok()) return now.status().WithPrefix("--now");
    l.options.now = *now;
  }
  if (!args.template_file.empty()) {
    PAGODA_ASSIGN_OR_RETURN(l.template_text, ReadFile(args.template_file, "--template"));
    return l;
  }
  PAGODA_ASSIGN_OR_RETURN(l.model, LoadModel(args.model));
  if (l.model->chat_template.empty()) {
    return NotFound("--model " + args.model +
                    ": no chat template (GGUF tokenizer.chat_template, tokenizer_config.json "
                    "chat_template or chat_template.jinja)");
  }
  l.template_text = l.model->chat_template;
  AddSpecialTokens(*l.model->tokenizer, &l.vars);
  return l;
}

void PrintJson(const jinja::Rendered& r, const Model* model) {
  Json segments = Json::array();
  for (const jinja::Segment& s : r.segments) {
    segments.push_back({{"kind", s.kind == jinja::SegmentKind::kContent ? "content" : "template"},
                        {"offset", s.offset},
                        {"length", s.length},
                        {"text", r.text.substr(s.offset, s.length)}});
  }
  Json out = {{"text", r.text}, {"segments", std::move(segments)}};
  if (model != nullptr) out["token_ids"] = EncodeChatPrompt(*model->tokenizer, r);
  std::cout << out.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
}

int RunRenderTemplate(const RenderTemplateArgs& args) {
  auto loaded = Load(args);
  if (!loaded.ok()) {
    std::fprintf(stderr, "error: %s\n", loaded.status().ToString().c_str());
    return 2;
  }
  auto tmpl = jinja::Template::Parse(loaded->template_text);
  Result<jinja::Rendered> r = tmpl.ok() ? tmpl->Render(loaded->vars, loaded->options)
                                        : Result<jinja::Rendered>(tmpl.status());
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kAborted) {
      std::fprintf(stderr, "error: the template raised: %s\n", r.status().message().c_str());
    } else {
      std::fprintf(stderr, "error: %s\n", r.status().ToString().c_str());
    }
    return 1;
  }
  if (args.json) {
    PrintJson(*r, loaded->model.get());
  } else {
    std::fwrite(r->text.data(), 1, r->text.size(), stdout);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

void RegisterRenderTemplate(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<RenderTemplateArgs>();
  CLI::App* cmd =
      app.add_subcommand("render-template",
                         "Render a chat template over a JSON file of variables, as Hugging Face's "
                         "apply_chat_template does");
  auto* model = cmd->add_option("--model,-m", args->model,
                                "GGUF model or Hugging Face directory whose chat template to "
                                "render (its bos_token / eos_token are the defaults)");
  auto* file = cmd->add_option("--template,-t", args->template_file, "Jinja template file");
  model->excludes(file);
  cmd->add_option("--vars", args->vars_file,
                  "JSON object: messages, add_generation_prompt, bos_token, eos_token, tools, "
                  "documents and any extra keyword (e.g. enable_thinking)")
      ->required();
  cmd->add_option("--now", args->now,
                  "Fix strftime_now's clock, e.g. 2026-07-26T12:00:00 (default: local time)");
  cmd->add_flag("--json", args->json,
                "Print JSON: text, segments (template / content) and, with --model, token ids");
  cmd->callback([args, exit_code] { *exit_code = RunRenderTemplate(*args); });
}

}  // namespace pagoda::cli
