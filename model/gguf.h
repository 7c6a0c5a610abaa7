// GGUF reader: opens a GGUF v2/v3 file by mmap and exposes its metadata and tensor table.
//
// Every field read from the file is bounds-checked: a malformed, truncated or hostile file
// yields a Status naming the offending field, never a crash or an allocation larger than the
// file justifies. Tensor data stays in the mapping; GgufTensor::data points into it and lives
// as long as the GgufFile.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/mapped_file.h"
#include "common/status.h"
#include "model/tensor_types.h"

namespace pagoda {

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
const char* GgufTypeName(GgufType type);

// One metadata value. Scalars: integers in `i` (uint64 values above INT64_MAX keep their bit
// pattern), floats in `f`, bools in `i` (0/1), strings in `str`. Arrays: `elem_type` plus one of
// `arr_i` / `arr_f` / `arr_str` / `arr` (nested arrays), by element kind.
struct GgufValue {
  GgufType type = GgufType::kUint32;
  int64_t i = 0;
  double f = 0.0;
  std::string str;
  GgufType elem_type = GgufType::kUint32;
  std::vector<int64_t> arr_i;
  std::vector<double> arr_f;
  std::vector<std::string> arr_str;
  std::vector<GgufValue> arr;

  bool is_integer() const;  // any int/uint/bool scalar
  bool is_float() const { return type == GgufType::kFloat32 || type == GgufType::kFloat64; }
  uint64_t array_size() const;
  std::string ToShortString(size_t max_items = 8) const;  // for `pagoda inspect`
};

struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> ne;  // GGML order: ne[0] is the contiguous dimension
  uint64_t offset = 0;      // relative to the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;
  int64_t num_elements() const;
  std::string ShapeString() const;  // e.g. "[256, 512]"
};

class GgufFile {
 public:
  // Maps and parses the file. Errors: NOT_FOUND (cannot open), DATA_LOSS/INVALID_ARGUMENT with
  // the field name for malformed content.
  static Result<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses an in-memory image (the bytes must outlive the GgufFile; nothing is copied).
  static Result<std::unique_ptr<GgufFile>> Parse(std::span<const uint8_t> bytes);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return bytes_.size(); }

  // Keys in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* Find(std::string_view key) const;

  // Typed getters: NOT_FOUND if missing, INVALID_ARGUMENT naming the key on a type mismatch
  // or a value out of the target type's range.
  Result<int64_t> GetInt(std::string_view key) const;
  Result<double> GetFloat(std::string_view key) const;  // accepts integers too
  Result<std::string> GetString(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  const GgufValue* FindArray(std::string_view key) const;  // nullptr unless an array

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* FindTensor(std::string_view name) const;

 private:
  GgufFile() = default;
  friend class GgufParser;

  MappedFile map_;  // empty for Parse()d in-memory images
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace pagoda
