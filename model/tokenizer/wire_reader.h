// A minimal reader for the protobuf wire format (enough to parse SentencePiece models without
// a protobuf library): varints, fixed32/fixed64 and length-delimited fields.
//
// Every read is bounds-checked; errors are DataLoss Statuses naming the absolute byte offset.
// Nothing is allocated from lengths found in the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pagoda {

enum class WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

const char* WireTypeName(WireType type);

class WireReader {
 public:
  // `base_offset` is the position of `data` inside the whole buffer (used in error messages).
  explicit WireReader(std::span<const uint8_t> data, size_t base_offset = 0)
      : data_(data), base_(base_offset) {}

  bool done() const { return pos_ >= data_.size(); }
  // Absolute offset of the next unread byte.
  size_t offset() const { return base_ + pos_; }

  // Reads a field key. Field number 0 and wire types 6/7 are errors.
  Status ReadTag(uint32_t* field, WireType* type);
  Status ReadVarint(uint64_t* value);
  Status ReadFixed32(uint32_t* value);
  Status ReadFixed64(uint64_t* value);
  // Reads a length-delimited payload; `*payload_offset` gets its absolute offset.
  Status ReadLengthDelimited(std::span<const uint8_t>* payload, size_t* payload_offset);
  // Skips the payload of a field whose key has been read. Groups are not supported.
  Status SkipField(WireType type);

 private:
  Status Error(const std::string& what) const;

  std::span<const uint8_t> data_;
  size_t base_;
  size_t pos_ = 0;
};

// Checks a field's wire type; the error names the message and field.
Status ExpectWireType(WireType got, WireType want, std::string_view field_name);

inline std::string_view AsStringView(std::span<const uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace pagoda
