#include "model/gguf_bpe.h"

#include <cstdint>
#include <string>
#include <utility>

namespace pagoda {
namespace {

Status ReadTokenId(const GgufFile& f, const std::string& key, size_t n, int32_t* out) {
  auto v = f.GetInt(key);
  if (!v.ok()) return v.status().code() == StatusCode::kNotFound ? Status::Ok() : v.status();
  *out = (*v < 0 || *v > INT32_MAX) ? -1 : static_cast<int32_t>(*v);  // 0xFFFFFFFF = none
  if (*out >= static_cast<int64_t>(n)) {
    return InvalidArgument("metadata '" + key + "': id " + std::to_string(*out) +
                           " is outside [0, " + std::to_string(n) + ")");
  }
  return Status::Ok();
}

Status ReadMerges(const GgufFile& f, BpeVocab* v) {
  const GgufValue* merges = f.FindArray("tokenizer.ggml.merges");
  if (!merges || merges->elem_type != GgufType::kString) {
    return InvalidArgument("metadata 'tokenizer.ggml.merges': missing or not a string array");
  }
  v->merges.reserve(merges->arr_str.size());
  for (size_t i = 0; i < merges->arr_str.size(); ++i) {
    const std::string& m = merges->arr_str[i];
    // As llama.cpp: the separator is the first space after the first character.
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (space == std::string::npos || space + 1 >= m.size()) {
      return InvalidArgument("metadata 'tokenizer.ggml.merges'[" + std::to_string(i) +
                             "]: expected \"a b\"");
    }
    v->merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }
  return Status::Ok();
}

Status ReadKinds(const GgufFile& f, BpeVocab* v) {
  const size_t n = v->tokens.size();
  const GgufValue* types = f.FindArray("tokenizer.ggml.token_type");
  if (!types) {
    v->kinds.assign(n, TokenKind::kNormal);
    return Status::Ok();
  }
  if (types->arr_i.size() != n) {
    return InvalidArgument(
        "metadata 'tokenizer.ggml.token_type': " + std::to_string(types->array_size()) +
        " integers for " + std::to_string(n) + " tokens");
  }
  v->kinds.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t t = types->arr_i[i];
    if (t < 1 || t > 6) {
      return InvalidArgument("metadata 'tokenizer.ggml.token_type'[" + std::to_string(i) +
                             "]: value " + std::to_string(t) + " (expected 1..6)");
    }
    v->kinds.push_back(static_cast<TokenKind>(t));
  }
  return Status::Ok();
}

bool IsLlama3Pre(const std::string& pre) {
  return pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3";
}

}  // namespace

Result<BpeVocab> BpeVocabFromGguf(const GgufFile& f) {
  PAGODA_ASSIGN_OR_RETURN(const std::string model, f.GetString("tokenizer.ggml.model"));
  if (model != "gpt2") {
    return InvalidArgument("metadata 'tokenizer.ggml.model': '" + model +
                           "' is not a byte-level BPE vocabulary (expected gpt2)");
  }
  const GgufValue* tokens = f.FindArray("tokenizer.ggml.tokens");
  if (!tokens || tokens->elem_type != GgufType::kString) {
    return InvalidArgument("metadata 'tokenizer.ggml.tokens': missing or not a string array");
  }
  BpeVocab v;
  v.tokens = tokens->arr_str;
  PAGODA_RETURN_IF_ERROR(ReadKinds(f, &v));
  PAGODA_RETURN_IF_ERROR(ReadMerges(f, &v));
  auto pre = f.GetString("tokenizer.ggml.pre");
  if (!pre.ok() && pre.status().code() != StatusCode::kNotFound) return pre.status();
  v.pre_tokenizer = pre.ok() ? *pre : "default";
  v.ignore_merges = IsLlama3Pre(v.pre_tokenizer);
  PAGODA_RETURN_IF_ERROR(ReadTokenId(f, "tokenizer.ggml.bos_token_id", v.tokens.size(), &v.bos_id));
  PAGODA_RETURN_IF_ERROR(ReadTokenId(f, "tokenizer.ggml.eos_token_id", v.tokens.size(), &v.eos_id));
  PAGODA_RETURN_IF_ERROR(
      ReadTokenId(f, "tokenizer.ggml.unknown_token_id", v.tokens.size(), &v.unk_id));
  auto add_bos = f.GetBool("tokenizer.ggml.add_bos_token");
  if (!add_bos.ok() && add_bos.status().code() != StatusCode::kNotFound) {
    return add_bos.status();
  }
  v.add_bos = add_bos.ok() ? *add_bos : IsLlama3Pre(v.pre_tokenizer);
  return v;
}

}  // namespace pagoda
