// `pagoda tokenize`: text -> token ids (and pieces) with a model's tokenizer or a
// SentencePiece tokenizer.model.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "model/model.h"
#include "model/tokenizer/sentencepiece_model.h"
#include "model/tokenizer/spm_tokenizer.h"
#include "tools/commands.h"

namespace pagoda::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  bool no_bos = false;
  bool json = false;
};

Result<std::unique_ptr<Tokenizer>> OpenTokenizer(const std::string& path) {
  auto gguf = GgufFile::Open(path);
  if (gguf.ok()) return LoadGgufTokenizer(**gguf);
  auto spm = LoadSentencePieceModel(path);
  if (!spm.ok()) {
    return InvalidArgument("--model " + path + ": neither a GGUF (" + gguf.status().message() +
                           ") nor a SentencePiece model (" + spm.status().message() + ")");
  }
  return MakeSpmTokenizer(std::move(spm).value());
}

int RunTokenize(const TokenizeArgs& args) {
  auto tok = OpenTokenizer(args.model);
  if (!tok.ok()) {
    std::fprintf(stderr, "error: %s\n", tok.status().ToString().c_str());
    return 1;
  }
  const Tokenizer& t = **tok;
  const auto ids = t.Encode(args.text, !args.no_bos && t.add_bos_by_default());
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
  cmd->add_option("--model,-m", args->model, "GGUF model or SentencePiece tokenizer.model")
      ->required();
  cmd->add_option("--text,-t,--prompt", args->text, "Text to tokenize")->required();
  cmd->add_flag("--no-bos", args->no_bos, "Do not add BOS");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->callback([args, exit_code] { *exit_code = RunTokenize(*args); });
}

}  // namespace pagoda::cli
