#include "model/tokenizer/sentencepiece_model.h"

#include <cstring>
#include <fstream>
#include <utility>
#include <vector>

#include "model/tokenizer/wire_reader.h"

namespace pagoda {
namespace {

// sentencepiece.TrainerSpec.ModelType
constexpr uint64_t kModelTypeBpe = 2;

struct TrainerSpec {
  uint64_t model_type = 1;  // UNIGRAM is the proto default
  int32_t unk_id = 0;
  int32_t bos_id = 1;
  int32_t eos_id = 2;
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  bool has_unk_surface = false;
  std::string unk_surface;
};

struct NormalizerSpec {
  std::string name;
  size_t charsmap_bytes = 0;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

struct ModelProto {
  SpmVocab vocab;  // pieces, scores, kinds only
  TrainerSpec trainer;
  NormalizerSpec normalizer;
  NormalizerSpec denormalizer;
};

// Field readers: `field` names the field; callers prefix the message path on error.
Status ReadVarintField(WireReader& r, WireType type, const char* field, uint64_t* v) {
  PAGODA_RETURN_IF_ERROR(ExpectWireType(type, WireType::kVarint, field));
  Status st = r.ReadVarint(v);
  return st.ok() ? st : st.WithPrefix(field);
}

Status ReadInt32Field(WireReader& r, WireType type, const char* field, int32_t* v) {
  uint64_t raw = 0;
  PAGODA_RETURN_IF_ERROR(ReadVarintField(r, type, field, &raw));
  *v = static_cast<int32_t>(raw);  // int32 is sign-extended to 64 bits on the wire
  return Status::Ok();
}

Status ReadBoolField(WireReader& r, WireType type, const char* field, bool* v) {
  uint64_t raw = 0;
  PAGODA_RETURN_IF_ERROR(ReadVarintField(r, type, field, &raw));
  *v = raw != 0;
  return Status::Ok();
}

Status ReadBytesField(WireReader& r, WireType type, const char* field,
                      std::span<const uint8_t>* payload, size_t* payload_offset) {
  PAGODA_RETURN_IF_ERROR(ExpectWireType(type, WireType::kLengthDelimited, field));
  Status st = r.ReadLengthDelimited(payload, payload_offset);
  return st.ok() ? st : st.WithPrefix(field);
}

Status ReadStringField(WireReader& r, WireType type, const char* field, std::string* v) {
  std::span<const uint8_t> payload;
  size_t payload_offset = 0;
  PAGODA_RETURN_IF_ERROR(ReadBytesField(r, type, field, &payload, &payload_offset));
  v->assign(AsStringView(payload));
  return Status::Ok();
}

Status ReadFloatField(WireReader& r, WireType type, const char* field, float* v) {
  PAGODA_RETURN_IF_ERROR(ExpectWireType(type, WireType::kFixed32, field));
  uint32_t bits = 0;
  Status st = r.ReadFixed32(&bits);
  if (!st.ok()) return st.WithPrefix(field);
  std::memcpy(v, &bits, sizeof(*v));
  return Status::Ok();
}

// ModelProto.SentencePiece {1: piece, 2: score, 3: type}.
Status ParsePiece(WireReader r, SpmVocab* vocab) {
  std::string piece;
  float score = 0.0f;
  uint64_t type = 1;  // NORMAL
  while (!r.done()) {
    uint32_t field = 0;
    WireType wt{};
    PAGODA_RETURN_IF_ERROR(r.ReadTag(&field, &wt));
    if (field == 1) {
      PAGODA_RETURN_IF_ERROR(ReadStringField(r, wt, "piece", &piece));
    } else if (field == 2) {
      PAGODA_RETURN_IF_ERROR(ReadFloatField(r, wt, "score", &score));
    } else if (field == 3) {
      PAGODA_RETURN_IF_ERROR(ReadVarintField(r, wt, "type", &type));
    } else {
      PAGODA_RETURN_IF_ERROR(r.SkipField(wt));
    }
  }
  if (type < 1 || type > 6) {
    return DataLoss("type = " + std::to_string(type) + " is not a valid piece type (1..6)");
  }
  vocab->pieces.push_back(std::move(piece));
  vocab->scores.push_back(score);
  vocab->kinds.push_back(static_cast<TokenKind>(type));
  return Status::Ok();
}

// One TrainerSpec field; unknown fields are skipped.
Status ParseTrainerField(WireReader& r, uint32_t field, WireType wt, TrainerSpec* spec) {
  switch (field) {
    case 3:
      return ReadVarintField(r, wt, "model_type", &spec->model_type);
    case 24:
      return ReadBoolField(r, wt, "treat_whitespace_as_suffix", &spec->treat_whitespace_as_suffix);
    case 35:
      return ReadBoolField(r, wt, "byte_fallback", &spec->byte_fallback);
    case 40:
      return ReadInt32Field(r, wt, "unk_id", &spec->unk_id);
    case 41:
      return ReadInt32Field(r, wt, "bos_id", &spec->bos_id);
    case 42:
      return ReadInt32Field(r, wt, "eos_id", &spec->eos_id);
    case 44:
      spec->has_unk_surface = true;
      return ReadStringField(r, wt, "unk_surface", &spec->unk_surface);
    default:
      return r.SkipField(wt);
  }
}

Status ParseTrainerSpec(WireReader r, TrainerSpec* spec) {
  while (!r.done()) {
    uint32_t field = 0;
    WireType wt{};
    PAGODA_RETURN_IF_ERROR(r.ReadTag(&field, &wt));
    PAGODA_RETURN_IF_ERROR(ParseTrainerField(r, field, wt, spec));
  }
  return Status::Ok();
}

Status ParseNormalizerSpec(WireReader r, NormalizerSpec* spec) {
  while (!r.done()) {
    uint32_t field = 0;
    WireType wt{};
    PAGODA_RETURN_IF_ERROR(r.ReadTag(&field, &wt));
    if (field == 1) {
      PAGODA_RETURN_IF_ERROR(ReadStringField(r, wt, "name", &spec->name));
    } else if (field == 2) {
      std::span<const uint8_t> charsmap;
      size_t offset = 0;
      PAGODA_RETURN_IF_ERROR(ReadBytesField(r, wt, "precompiled_charsmap", &charsmap, &offset));
      spec->charsmap_bytes = charsmap.size();
    } else if (field == 3) {
      PAGODA_RETURN_IF_ERROR(ReadBoolField(r, wt, "add_dummy_prefix", &spec->add_dummy_prefix));
    } else if (field == 4) {
      PAGODA_RETURN_IF_ERROR(
          ReadBoolField(r, wt, "remove_extra_whitespaces", &spec->remove_extra_whitespaces));
    } else if (field == 5) {
      PAGODA_RETURN_IF_ERROR(ReadBoolField(r, wt, "escape_whitespaces", &spec->escape_whitespaces));
    } else {
      PAGODA_RETURN_IF_ERROR(r.SkipField(wt));
    }
  }
  return Status::Ok();
}

// One ModelProto field {1: repeated pieces, 2: trainer_spec, 3: normalizer_spec,
// 5: denormalizer_spec}. Repeated occurrences of a singular message merge, as in protobuf.
Status ParseModelField(WireReader& r, uint32_t field, WireType wt, ModelProto* model) {
  if (field != 1 && field != 2 && field != 3 && field != 5) return r.SkipField(wt);
  std::span<const uint8_t> payload;
  size_t offset = 0;
  PAGODA_RETURN_IF_ERROR(ReadBytesField(r, wt, "message", &payload, &offset));
  const WireReader sub(payload, offset);
  switch (field) {
    case 1:
      return ParsePiece(sub, &model->vocab);
    case 2:
      return ParseTrainerSpec(sub, &model->trainer);
    case 3:
      return ParseNormalizerSpec(sub, &model->normalizer);
    default:
      return ParseNormalizerSpec(sub, &model->denormalizer);
  }
}

std::string ModelFieldName(uint32_t field, size_t piece_index) {
  switch (field) {
    case 1:
      return "ModelProto.pieces[" + std::to_string(piece_index) + "]";
    case 2:
      return "ModelProto.trainer_spec";
    case 3:
      return "ModelProto.normalizer_spec";
    case 5:
      return "ModelProto.denormalizer_spec";
    default:
      return "ModelProto field " + std::to_string(field);
  }
}

Status ParseModelProto(std::span<const uint8_t> bytes, ModelProto* model) {
  WireReader r(bytes);
  while (!r.done()) {
    uint32_t field = 0;
    WireType wt{};
    Status st = r.ReadTag(&field, &wt);
    if (!st.ok()) return st.WithPrefix("ModelProto");
    const size_t piece_index = model->vocab.pieces.size();
    st = ParseModelField(r, field, wt, model);
    if (!st.ok()) return st.WithPrefix(ModelFieldName(field, piece_index));
  }
  return Status::Ok();
}

// Rejects models whose behaviour this tokenizer cannot reproduce exactly.
Status CheckSupported(const ModelProto& model) {
  if (model.trainer.model_type != kModelTypeBpe) {
    return Unimplemented("trainer_spec.model_type = " + std::to_string(model.trainer.model_type) +
                         " is not supported; only BPE (2) models are");
  }
  if (model.trainer.treat_whitespace_as_suffix) {
    return Unimplemented("trainer_spec.treat_whitespace_as_suffix = true is not supported");
  }
  if (model.normalizer.charsmap_bytes > 0) {
    return Unimplemented("normalizer_spec '" + model.normalizer.name +
                         "' uses a precompiled charsmap, which is not supported");
  }
  if (model.denormalizer.charsmap_bytes > 0) {
    return Unimplemented("denormalizer_spec with a precompiled charsmap is not supported");
  }
  return Status::Ok();
}

int32_t IdOrNone(int32_t id, size_t vocab_size) {
  return id >= 0 && static_cast<size_t>(id) < vocab_size ? id : -1;
}

}  // namespace

Result<SpmVocab> ParseSentencePieceModel(std::span<const uint8_t> bytes) {
  if (bytes.size() > kMaxSentencePieceModelBytes) {
    return ResourceExhausted("SentencePiece model of " + std::to_string(bytes.size()) +
                             " bytes exceeds the limit of " +
                             std::to_string(kMaxSentencePieceModelBytes));
  }
  ModelProto model;
  PAGODA_RETURN_IF_ERROR(ParseModelProto(bytes, &model));
  if (model.vocab.pieces.empty()) return DataLoss("SentencePiece model has no pieces");
  PAGODA_RETURN_IF_ERROR(CheckSupported(model));

  SpmVocab vocab = std::move(model.vocab);
  const size_t n = vocab.pieces.size();
  vocab.unk_id = model.trainer.unk_id;
  vocab.bos_id = IdOrNone(model.trainer.bos_id, n);
  vocab.eos_id = IdOrNone(model.trainer.eos_id, n);
  vocab.add_bos = vocab.bos_id >= 0;
  vocab.add_dummy_prefix = model.normalizer.add_dummy_prefix;
  vocab.remove_extra_whitespaces = model.normalizer.remove_extra_whitespaces;
  vocab.escape_whitespaces = model.normalizer.escape_whitespaces;
  vocab.byte_fallback = model.trainer.byte_fallback;
  if (model.trainer.has_unk_surface) vocab.unk_surface = model.trainer.unk_surface;
  PAGODA_RETURN_IF_ERROR(ValidateSpmVocab(vocab).WithPrefix("SentencePiece model"));
  return vocab;
}

Result<SpmVocab> LoadSentencePieceModel(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return NotFound("cannot open SentencePiece model '" + path + "'");
  const std::streamoff size = in.tellg();
  if (size < 0) return DataLoss("cannot determine the size of '" + path + "'");
  if (static_cast<uint64_t>(size) > kMaxSentencePieceModelBytes) {
    return ResourceExhausted("SentencePiece model '" + path + "' is " + std::to_string(size) +
                             " bytes, over the limit of " +
                             std::to_string(kMaxSentencePieceModelBytes));
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), size)) {
    return DataLoss("failed to read SentencePiece model '" + path + "'");
  }
  auto vocab = ParseSentencePieceModel(bytes);
  if (!vocab.ok()) return vocab.status().WithPrefix(path);
  return vocab;
}

}  // namespace pagoda
