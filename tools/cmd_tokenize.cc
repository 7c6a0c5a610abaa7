// `pagoda tokenize`: text -> token ids (and pieces) with the tokenizer of anything LoadTokenizer
// opens: a GGUF, a Hugging Face directory, a bare tokenizer.json or tokenizer.model. Encodes as
// the server encodes a text prompt (server/api_request.h EncodePrompt).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "server/api_request.h"
#include "tools/commands.h"

namespace pagoda::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  bool no_bos = false;
  bool parse_special = false;
  bool no_parse_special = false;
  bool json = false;
};

int RunTokenize(const TokenizeArgs& args) {
  auto tok = LoadTokenizer(args.model);
  if (!tok.ok()) {
    std::fprintf(stderr, "error: %s\n", tok.status().ToString().c_str());
    return 1;
  }
  const Tokenizer& t = **tok;
  ApiRequest prompt;
  prompt.prompt = args.text;
  if (args.no_bos) prompt.add_special_tokens = false;
  if (args.parse_special || args.no_parse_special) prompt.parse_special = args.parse_special;
  const auto ids = EncodePrompt(t, prompt);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.emplace_back(t.Piece(id));
  if (args.json) {
    nlohmann::json j = {{"token_ids", ids}, {"pieces", pieces}, {"decoded", t.Decode(ids)}};
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  for (size_t i = 0; i < ids.size(); ++i) std::printf("%6d  %s\n", ids[i], pieces[i].c_str());
  return 0;
}

}  // namespace

void RegisterTokenize(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Show the token ids of a text");
  cmd->add_option("--model,-m", args->model,
                  "GGUF model, Hugging Face directory, tokenizer.json or tokenizer.model")
      ->required();
  cmd->add_option("--text,-t,--prompt", args->text, "Text to tokenize")->required();
  cmd->add_flag("--no-bos", args->no_bos, "Do not add BOS");
  auto* parse = cmd->add_flag("--parse-special", args->parse_special,
                              "Control-token text (e.g. <|im_end|>) is the control token "
                              "(llama.cpp's parse_special; default: as the tokenizer does)");
  cmd->add_flag("--no-parse-special", args->no_parse_special, "Control-token text is plain text")
      ->excludes(parse);
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->callback([args, exit_code] { *exit_code = RunTokenize(*args); });
}

}  // namespace pagoda::cli
