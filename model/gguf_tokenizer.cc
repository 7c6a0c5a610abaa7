// Builds a Tokenizer from a GGUF file's tokenizer.ggml.* metadata.
#include "model/gguf.h"
#include "model/gguf_bpe.h"
#include "model/model.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/tokenizer/spm_tokenizer.h"

namespace pagoda {
namespace {

Status ReadTokenId(const GgufFile& f, const std::string& key, int32_t* out) {
  auto v = f.GetInt(key);
  if (!v.ok()) return v.status().code() == StatusCode::kNotFound ? Status::Ok() : v.status();
  // Some converters write 0xFFFFFFFF ("none") for absent special tokens.
  *out = (*v < 0 || *v > INT32_MAX) ? -1 : static_cast<int32_t>(*v);
  return Status::Ok();
}

Result<SpmVocab> SpmVocabFromGguf(const GgufFile& f) {
  const GgufValue* tokens = f.FindArray("tokenizer.ggml.tokens");
  if (!tokens || tokens->elem_type != GgufType::kString) {
    return InvalidArgument("metadata 'tokenizer.ggml.tokens': missing or not a string array");
  }
  SpmVocab v;
  v.pieces = tokens->arr_str;
  const size_t n = v.pieces.size();
  const GgufValue* scores = f.FindArray("tokenizer.ggml.scores");
  if (scores) {
    if (scores->arr_f.size() != n) {
      return InvalidArgument(
          "metadata 'tokenizer.ggml.scores': " + std::to_string(scores->array_size()) +
          " floats for " + std::to_string(n) + " tokens");
    }
    v.scores.assign(scores->arr_f.begin(), scores->arr_f.end());
  } else {
    v.scores.assign(n, 0.0f);
  }
  const GgufValue* types = f.FindArray("tokenizer.ggml.token_type");
  if (types) {
    if (types->arr_i.size() != n) {
      return InvalidArgument(
          "metadata 'tokenizer.ggml.token_type': " + std::to_string(types->array_size()) +
          " integers for " + std::to_string(n) + " tokens");
    }
    for (int64_t t : types->arr_i) {
      if (t < 1 || t > 6) {
        return InvalidArgument("metadata 'tokenizer.ggml.token_type': value " + std::to_string(t) +
                               " (expected 1..6)");
      }
      v.kinds.push_back(static_cast<TokenKind>(t));
    }
  } else {
    v.kinds.assign(n, TokenKind::kNormal);
  }
  v.bos_id = 1, v.eos_id = 2, v.unk_id = 0;
  PAGODA_RETURN_IF_ERROR(ReadTokenId(f, "tokenizer.ggml.bos_token_id", &v.bos_id));
  PAGODA_RETURN_IF_ERROR(ReadTokenId(f, "tokenizer.ggml.eos_token_id", &v.eos_id));
  PAGODA_RETURN_IF_ERROR(ReadTokenId(f, "tokenizer.ggml.unknown_token_id", &v.unk_id));
  auto add_bos = f.GetBool("tokenizer.ggml.add_bos_token");
  v.add_bos = add_bos.ok() ? *add_bos : true;
  auto dummy = f.GetBool("tokenizer.ggml.add_space_prefix");
  v.add_dummy_prefix = dummy.ok() ? *dummy : true;
  return v;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const GgufFile& f) {
  auto model = f.GetString("tokenizer.ggml.model");
  if (!model.ok()) return model.status();
  if (*model == "gpt2") {
    PAGODA_ASSIGN_OR_RETURN(BpeVocab vocab, BpeVocabFromGguf(f));
    return MakeBpeTokenizer(std::move(vocab));
  }
  if (*model != "llama") {
    return Unimplemented("metadata 'tokenizer.ggml.model': '" + *model +
                         "' is not supported (expected llama or gpt2)");
  }
  PAGODA_ASSIGN_OR_RETURN(SpmVocab vocab, SpmVocabFromGguf(f));
  return MakeSpmTokenizer(std::move(vocab));
}

}  // namespace pagoda
