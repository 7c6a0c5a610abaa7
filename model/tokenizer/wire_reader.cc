#include "model/tokenizer/wire_reader.h"

namespace pagoda {

const char* WireTypeName(WireType type) {
  switch (type) {
    case WireType::kVarint:
      return "varint";
    case WireType::kFixed64:
      return "fixed64";
    case WireType::kLengthDelimited:
      return "length-delimited";
    case WireType::kStartGroup:
      return "start-group";
    case WireType::kEndGroup:
      return "end-group";
    case WireType::kFixed32:
      return "fixed32";
  }
  return "invalid";
}

Status WireReader::Error(const std::string& what) const {
  return DataLoss(what + " at byte offset " + std::to_string(offset()));
}

Status WireReader::ReadVarint(uint64_t* value) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (done()) return Error("truncated varint");
    const uint8_t byte = data_[pos_++];
    result |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) {
      *value = result;
      return Status::Ok();
    }
  }
  return Error("varint longer than 10 bytes");
}

Status WireReader::ReadTag(uint32_t* field, WireType* type) {
  const size_t start = pos_;
  uint64_t key = 0;
  PAGODA_RETURN_IF_ERROR(ReadVarint(&key));
  const uint64_t field_number = key >> 3;
  const uint32_t wire_type = static_cast<uint32_t>(key & 7);
  if (field_number == 0 || field_number > 0x1FFFFFFF) {
    pos_ = start;
    return Error("invalid field number " + std::to_string(field_number));
  }
  if (wire_type > 5) {
    pos_ = start;
    return Error("invalid wire type " + std::to_string(wire_type));
  }
  *field = static_cast<uint32_t>(field_number);
  *type = static_cast<WireType>(wire_type);
  return Status::Ok();
}

Status WireReader::ReadFixed32(uint32_t* value) {
  if (data_.size() - pos_ < 4) return Error("truncated fixed32");
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | data_[pos_ + i];  // little-endian
  pos_ += 4;
  *value = v;
  return Status::Ok();
}

Status WireReader::ReadFixed64(uint64_t* value) {
  if (data_.size() - pos_ < 8) return Error("truncated fixed64");
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | data_[pos_ + i];
  pos_ += 8;
  *value = v;
  return Status::Ok();
}

Status WireReader::ReadLengthDelimited(std::span<const uint8_t>* payload, size_t* payload_offset) {
  uint64_t length = 0;
  PAGODA_RETURN_IF_ERROR(ReadVarint(&length));
  const size_t remaining = data_.size() - pos_;
  if (length > remaining) {
    return Error("length " + std::to_string(length) + " exceeds the " + std::to_string(remaining) +
                 " remaining bytes");
  }
  *payload_offset = offset();
  *payload = data_.subspan(pos_, static_cast<size_t>(length));
  pos_ += static_cast<size_t>(length);
  return Status::Ok();
}

Status WireReader::SkipField(WireType type) {
  uint64_t u64 = 0;
  uint32_t u32 = 0;
  std::span<const uint8_t> payload;
  size_t payload_offset = 0;
  switch (type) {
    case WireType::kVarint:
      return ReadVarint(&u64);
    case WireType::kFixed64:
      return ReadFixed64(&u64);
    case WireType::kFixed32:
      return ReadFixed32(&u32);
    case WireType::kLengthDelimited:
      return ReadLengthDelimited(&payload, &payload_offset);
    case WireType::kStartGroup:
    case WireType::kEndGroup:
      break;
  }
  return Error(std::string("unsupported wire type ") + WireTypeName(type));
}

Status ExpectWireType(WireType got, WireType want, std::string_view field_name) {
  if (got == want) return Status::Ok();
  return DataLoss(std::string(field_name) + " has wire type " + WireTypeName(got) + ", expected " +
                  WireTypeName(want));
}

}  // namespace pagoda
