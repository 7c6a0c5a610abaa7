// Loader for SentencePiece `tokenizer.model` files (a serialized sentencepiece.ModelProto),
// parsed with a hand-written protobuf wire reader — no protobuf dependency.
//
// Reads ModelProto.pieces (piece, score, type), TrainerSpec (model_type, unk/bos/eos ids,
// byte_fallback, unk_surface, treat_whitespace_as_suffix) and NormalizerSpec
// (add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces, precompiled_charsmap).
// Truncated or hostile input yields a DataLoss/InvalidArgument Status naming what was wrong;
// models this tokenizer cannot reproduce exactly (non-BPE model types, precompiled charsmaps,
// whitespace-as-suffix) yield Unimplemented.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"
#include "model/tokenizer/spm_tokenizer.h"

namespace pagoda {

// Largest tokenizer.model accepted (Llama's is ~0.5 MB).
inline constexpr size_t kMaxSentencePieceModelBytes = size_t{256} << 20;

Result<SpmVocab> ParseSentencePieceModel(std::span<const uint8_t> bytes);
Result<SpmVocab> LoadSentencePieceModel(const std::string& path);

}  // namespace pagoda
