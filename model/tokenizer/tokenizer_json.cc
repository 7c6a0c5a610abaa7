#include "model/tokenizer/tokenizer_json.h"

#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/json_depth.h"
#include "model/tokenizer/pretokenizer.h"

namespace pagoda {
namespace {

using Json = nlohmann::json;

// Llama 3's tokenizer.json spells the contractions case-insensitively.
constexpr char kLlama3PatternHf[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

Status Bad(const std::string& path, const std::string& what, const char* file = "tokenizer.json") {
  return InvalidArgument(std::string(file) + ": " + path + ": " + what);
}

// Token table under construction: id -> token, with "filled" marks.
struct Table {
  std::vector<std::string> tokens;
  std::vector<TokenKind> kinds;
  std::vector<bool> filled;
};

Result<int32_t> ReadId(const Json& v, size_t limit, const std::string& path,
                       const char* file = "tokenizer.json") {
  if (!v.is_number_integer()) return Bad(path, "expected an integer id", file);
  const bool in_range =
      v.is_number_unsigned()
          ? v.get<uint64_t>() < limit
          : v.get<int64_t>() >= 0 && static_cast<uint64_t>(v.get<int64_t>()) < limit;
  if (!in_range) {
    return Bad(path, "id " + v.dump() + " is outside [0, " + std::to_string(limit) + ")", file);
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

// model.vocab (or encoder.json): {"token": id}. Ids must be below `limit`.
Status ReadVocabMap(const Json& vocab, const char* file, const std::string& path, size_t limit,
                    Table* t) {
  if (!vocab.is_object()) return Bad(path, "expected an object of token -> id", file);
  t->tokens.assign(limit, std::string());
  t->kinds.assign(limit, TokenKind::kUnused);
  t->filled.assign(limit, false);
  for (const auto& [token, value] : vocab.items()) {
    const std::string where = path + "[" + Json(token).dump() + "]";
    PAGODA_ASSIGN_OR_RETURN(const int32_t id, ReadId(value, limit, where, file));
    if (t->filled[id]) return Bad(where, "id " + std::to_string(id) + " is used twice", file);
    t->tokens[id] = token;
    t->kinds[id] = TokenKind::kNormal;
    t->filled[id] = true;
  }
  return Status::Ok();
}

// "a b" -> {a, b}; false unless there is exactly one space separating two non-empty parts.
bool SplitMerge(std::string_view line, std::pair<std::string, std::string>* out) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 >= line.size() ||
      line.find(' ', space + 1) != std::string_view::npos) {
    return false;
  }
  *out = {std::string(line.substr(0, space)), std::string(line.substr(space + 1))};
  return true;
}

Status ReadMerges(const Json& merges, BpeVocab* v) {
  if (merges.is_null()) return Status::Ok();
  if (!merges.is_array()) return Bad("model.merges", "expected an array");
  v->merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& m = merges[i];
    std::pair<std::string, std::string> pair;
    if (m.is_string() && SplitMerge(m.get_ref<const std::string&>(), &pair)) {
      v->merges.push_back(std::move(pair));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      v->merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return Bad("model.merges[" + std::to_string(i) + "]", "expected \"a b\" or [a, b]");
    }
  }
  return Status::Ok();
}

Status ReadAddedTokens(const Json& added, size_t limit, Table* t) {
  if (added.is_null()) return Status::Ok();
  if (!added.is_array()) return Bad("added_tokens", "expected an array");
  for (size_t i = 0; i < added.size(); ++i) {
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    const Json& a = added[i];
    if (!a.is_object()) return Bad(where, "expected an object");
    const auto content = a.find("content");
    if (content == a.end() || !content->is_string() ||
        content->get_ref<const std::string&>().empty()) {
      return Bad(where + ".content", "expected a non-empty string");
    }
    const auto id_it = a.find("id");
    if (id_it == a.end()) return Bad(where + ".id", "missing");
    PAGODA_ASSIGN_OR_RETURN(const int32_t id, ReadId(*id_it, limit, where + ".id"));
    const auto special = a.find("special");
    if (special != a.end() && !special->is_boolean())
      return Bad(where + ".special", "expected a bool");
    const bool is_special = special != a.end() && special->get<bool>();
    t->tokens[id] = content->get<std::string>();
    t->kinds[id] = is_special ? TokenKind::kControl : TokenKind::kUserDefined;
    t->filled[id] = true;
  }
  return Status::Ok();
}

// Pre-tokenizer state gathered from the JSON.
struct PreState {
  std::vector<std::string> regexes;
  bool byte_level = false;
  bool add_prefix_space = false;
};

bool BoolField(const Json& j, const char* key, bool fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

Status ReadOnePreTokenizer(const Json& p, const std::string& path, PreState* st) {
  if (!p.is_object() || !p.contains("type") || !p["type"].is_string()) {
    return Bad(path, "expected an object with a string \"type\"");
  }
  const std::string& type = p["type"].get_ref<const std::string&>();
  if (type == "ByteLevel") {
    st->byte_level = true;
    st->add_prefix_space = BoolField(p, "add_prefix_space", true);
    if (BoolField(p, "use_regex", true)) st->regexes.emplace_back(kGpt2Pattern);
    return Status::Ok();
  }
  if (type == "Digits") {
    st->regexes.emplace_back(BoolField(p, "individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
    return Status::Ok();
  }
  if (type == "Split") {
    const auto pattern = p.find("pattern");
    if (pattern == p.end() || !pattern->is_object() || !pattern->contains("Regex") ||
        !(*pattern)["Regex"].is_string()) {
      return Unimplemented("tokenizer.json: " + path +
                           ".pattern: only {\"Regex\": ...} is supported");
    }
    const auto behavior = p.find("behavior");
    if (BoolField(p, "invert", false) || behavior == p.end() || *behavior != "Isolated") {
      return Unimplemented("tokenizer.json: " + path +
                           ": only behavior \"Isolated\" without invert is supported");
    }
    st->regexes.push_back((*pattern)["Regex"].get<std::string>());
    return Status::Ok();
  }
  return Unimplemented("tokenizer.json: " + path + ".type: pre-tokenizer '" + type +
                       "' is not supported");
}

Status ReadPreTokenizer(const Json& p, PreState* st) {
  if (p.is_null()) return Status::Ok();
  if (p.is_object() && p.contains("type") && p["type"] == "Sequence") {
    const auto items = p.find("pretokenizers");
    if (items == p.end() || !items->is_array()) {
      return Bad("pre_tokenizer.pretokenizers", "expected an array");
    }
    for (size_t i = 0; i < items->size(); ++i) {
      PAGODA_RETURN_IF_ERROR(ReadOnePreTokenizer(
          (*items)[i], "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]", st));
    }
    return Status::Ok();
  }
  return ReadOnePreTokenizer(p, "pre_tokenizer", st);
}

void SetPreTokenizer(const PreState& st, BpeVocab* v) {
  v->add_prefix_space = st.add_prefix_space;
  const std::vector<std::string>& r = st.regexes;
  if (r.empty()) {
    v->pre_tokenizer = "none";
  } else if (r.size() == 1 && r[0] == kGpt2Pattern) {
    v->pre_tokenizer = "gpt2";
  } else if (r.size() == 1 && (r[0] == kLlama3Pattern || r[0] == kLlama3PatternHf)) {
    v->pre_tokenizer = "llama3";
  } else if (r.size() == 1 && r[0] == kQwen2Pattern) {
    v->pre_tokenizer = "qwen2";
  } else {
    v->pre_tokenizer = "custom";
    v->pre_tokenizer_regexes = r;
  }
}

bool IsByteLevelDecoder(const Json& d, int depth = 0) {
  if (!d.is_object() || depth > 4) return false;
  if (d.contains("type") && d["type"] == "ByteLevel") return true;
  const auto items = d.find("decoders");
  if (items == d.end() || !items->is_array()) return false;
  for (const Json& item : *items) {
    if (IsByteLevelDecoder(item, depth + 1)) return true;
  }
  return false;
}

// The TemplateProcessing post-processor (directly or inside a Sequence), or nullptr.
const Json* FindTemplate(const Json& pp) {
  if (!pp.is_object() || !pp.contains("type")) return nullptr;
  if (pp["type"] == "TemplateProcessing") return &pp;
  const auto items = pp.find("processors");
  if (pp["type"] != "Sequence" || items == pp.end() || !items->is_array()) return nullptr;
  for (const Json& item : *items) {
    if (item.is_object() && item.contains("type") && item["type"] == "TemplateProcessing") {
      return &item;
    }
  }
  return nullptr;
}

// BOS: the special token a TemplateProcessing "single" template starts with.
void ReadBos(const Json& post_processor, BpeVocab* v) {
  const Json* tp = FindTemplate(post_processor);
  if (tp == nullptr) return;
  const auto single = tp->find("single");
  if (single == tp->end() || !single->is_array() || single->empty()) return;
  const Json& first = (*single)[0];
  if (!first.is_object() || !first.contains("SpecialToken")) return;
  const Json& st = first["SpecialToken"];
  if (!st.is_object() || !st.contains("id") || !st["id"].is_string()) return;
  const std::string& name = st["id"].get_ref<const std::string&>();
  for (size_t i = 0; i < v->tokens.size(); ++i) {
    if (v->tokens[i] == name && v->kinds[i] == TokenKind::kControl) {
      v->bos_id = static_cast<int32_t>(i);
      v->add_bos = true;
      return;
    }
  }
}

void GuessEos(BpeVocab* v) {
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>"}) {
    for (size_t i = 0; i < v->tokens.size(); ++i) {
      if (v->tokens[i] == name && v->kinds[i] == TokenKind::kControl) {
        v->eos_id = static_cast<int32_t>(i);
        return;
      }
    }
  }
}

// Drops never-assigned ids at the end of the table; the rest stay as unused "" tokens.
void FinishTable(Table* t, BpeVocab* v) {
  size_t n = t->tokens.size();
  while (n > 0 && !t->filled[n - 1]) --n;
  t->tokens.resize(n);
  t->kinds.resize(n);
  v->tokens = std::move(t->tokens);
  v->kinds = std::move(t->kinds);
}

Status CheckModel(const Json& model) {
  if (!model.is_object()) return Bad("model", "expected an object");
  const auto type = model.find("type");
  if (type != model.end() && *type != "BPE") {
    return Unimplemented("tokenizer.json: model.type: " + type->dump() + " is not \"BPE\"");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(key);
    if (it != model.end() && !it->is_null() && *it != "") {
      return Unimplemented(std::string("tokenizer.json: model.") + key + " is not supported");
    }
  }
  return Status::Ok();
}

Status CheckNormalizer(const Json& root) {
  const auto n = root.find("normalizer");
  if (n == root.end() || n->is_null()) return Status::Ok();
  if (n->is_object() && n->contains("type") && (*n)["type"] == "NFC") return Status::Ok();
  return Unimplemented("tokenizer.json: normalizer: only null or NFC is supported");
}

Result<BpeVocab> ParseTokenizerJson(const Json& root) {
  if (!root.is_object()) return Bad("$", "expected an object");
  const auto model_it = root.find("model");
  if (model_it == root.end()) return Bad("model", "missing");
  const Json& model = *model_it;
  PAGODA_RETURN_IF_ERROR(CheckModel(model));
  PAGODA_RETURN_IF_ERROR(CheckNormalizer(root));
  const auto vocab_it = model.find("vocab");
  if (vocab_it == model.end()) return Bad("model.vocab", "missing");
  const Json added = root.value("added_tokens", Json());
  const size_t limit = vocab_it->size() + (added.is_array() ? added.size() : 0);
  Table table;
  PAGODA_RETURN_IF_ERROR(ReadVocabMap(*vocab_it, "tokenizer.json", "model.vocab", limit, &table));
  PAGODA_RETURN_IF_ERROR(ReadAddedTokens(added, limit, &table));
  BpeVocab v;
  PAGODA_RETURN_IF_ERROR(ReadMerges(model.value("merges", Json()), &v));
  PreState pre;
  PAGODA_RETURN_IF_ERROR(ReadPreTokenizer(root.value("pre_tokenizer", Json()), &pre));
  if (!pre.byte_level && !IsByteLevelDecoder(root.value("decoder", Json()))) {
    return Unimplemented(
        "tokenizer.json: not a byte-level BPE (no ByteLevel pre_tokenizer or "
        "decoder)");
  }
  SetPreTokenizer(pre, &v);
  FinishTable(&table, &v);
  if (v.tokens.empty()) return Bad("model.vocab", "is empty");
  const auto unk = model.find("unk_token");
  if (unk != model.end() && unk->is_string()) {
    for (size_t i = 0; i < v.tokens.size(); ++i) {
      if (v.tokens[i] == unk->get_ref<const std::string&>()) {
        v.unk_id = static_cast<int32_t>(i);
        break;
      }
    }
  }
  v.ignore_merges = BoolField(model, "ignore_merges", false);
  ReadBos(root.value("post_processor", Json()), &v);
  GuessEos(&v);
  PAGODA_RETURN_IF_ERROR(ValidateBpeVocab(v));
  return v;
}

Result<Json> ParseJson(std::string_view text, const char* file) {
  PAGODA_RETURN_IF_ERROR(CheckJsonDepth(text, file));
  Json root = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return InvalidArgument(std::string(file) + ": not valid JSON");
  return root;
}

}  // namespace

Result<BpeVocab> BpeVocabFromTokenizerJson(std::string_view json_text) {
  try {
    PAGODA_ASSIGN_OR_RETURN(const Json root, ParseJson(json_text, "tokenizer.json"));
    return ParseTokenizerJson(root);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("tokenizer.json: ") + e.what());
  }
}

namespace {

Result<BpeVocab> ParseGpt2Files(std::string_view encoder_json, std::string_view vocab_bpe) {
  PAGODA_ASSIGN_OR_RETURN(const Json encoder, ParseJson(encoder_json, "encoder.json"));
  Table table;
  PAGODA_RETURN_IF_ERROR(ReadVocabMap(encoder, "encoder.json", "$", encoder.size(), &table));
  BpeVocab v;
  FinishTable(&table, &v);
  if (v.tokens.empty()) return InvalidArgument("encoder.json: is empty");
  size_t line_no = 0;
  while (!vocab_bpe.empty()) {
    const size_t eol = std::min(vocab_bpe.find('\n'), vocab_bpe.size());
    std::string_view line = vocab_bpe.substr(0, eol);
    vocab_bpe.remove_prefix(std::min(eol + 1, vocab_bpe.size()));
    ++line_no;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    std::pair<std::string, std::string> merge;
    if (!SplitMerge(line, &merge)) {
      return InvalidArgument("vocab.bpe: line " + std::to_string(line_no) +
                             ": expected two tokens separated by one space");
    }
    v.merges.push_back(std::move(merge));
  }
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.tokens[i] == "<|endoftext|>") {
      v.kinds[i] = TokenKind::kControl;
      v.eos_id = static_cast<int32_t>(i);
    }
  }
  v.pre_tokenizer = "gpt2";
  return v;
}

}  // namespace

Result<BpeVocab> BpeVocabFromGpt2Files(std::string_view encoder_json, std::string_view vocab_bpe) {
  try {
    return ParseGpt2Files(encoder_json, vocab_bpe);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("encoder.json/vocab.bpe: ") + e.what());
  }
}

}  // namespace pagoda
