// safetensors reader (and a small writer): Hugging Face's tensor container.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"k": "v", ...},            (optional, string -> string)
//    "name": {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]}, ...}
// then the data buffer; offsets are relative to the buffer's start. Shapes are row-major
// (shape[0] outermost), the reverse of GGML's ne order.
//
// Every field is checked as in the GGUF reader: a header length beyond the file or over
// kMaxSafetensorsHeaderBytes, bad JSON, a duplicate name, an unknown dtype, a shape whose byte
// size overflows or differs from its data_offsets, offsets outside the buffer, overlapping or
// leaving holes (the reference implementation requires the tensors to tile the buffer) all give
// a Status naming the file and the field; nothing crashes or allocates more than the header
// justifies. All standard dtypes are parsed (so files holding e.g. an I64 buffer open), but
// only F32, F16 and BF16 map to a GgmlType Pagoda computes with: `type` is empty for the
// others and SafetensorsTensor::CheckSupported() names the tensor and dtype.
//
// Sharded checkpoints: SafetensorsSet::OpenDir reads `model.safetensors.index.json`
// ("weight_map": name -> shard file) or a single `model.safetensors`.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/mapped_file.h"
#include "common/status.h"
#include "model/tensor_types.h"

namespace pagoda {

// The reference implementation's limit on the JSON header.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{100} << 20;

struct SafetensorsTensor {
  std::string name;
  std::string dtype;              // as in the header: "F32", "BF16", "I64", ...
  std::optional<GgmlType> type;   // F32 / F16 / BF16; empty for dtypes Pagoda cannot use
  std::vector<int64_t> shape;     // row-major: shape[0] is the outermost dimension
  uint64_t begin = 0, end = 0;    // data_offsets, relative to the data buffer
  const uint8_t* data = nullptr;  // points into the mapping
  uint64_t nbytes() const { return end - begin; }
  std::string ShapeString() const;  // "[rows, cols]"
  // OK when `type` is set, else Unimplemented naming the tensor and dtype.
  Status CheckSupported() const;
};

class SafetensorsFile {
 public:
  // Maps and parses `path`. Errors are prefixed with the path.
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Parses an in-memory image (the bytes must outlive the object; nothing is copied).
  static Result<std::unique_ptr<SafetensorsFile>> Parse(std::span<const uint8_t> bytes);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // in name order
  const SafetensorsTensor* Find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  Status ParseHeader();

  MappedFile map_;  // empty for Parse()d in-memory images
  std::span<const uint8_t> bytes_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// All the tensors of a checkpoint directory, possibly spread over several shards.
class SafetensorsSet {
 public:
  // `dir`/model.safetensors.index.json if present, else `dir`/model.safetensors. Shard names
  // must be plain file names (no '/'); every weight_map entry must exist in its shard.
  static Result<std::unique_ptr<SafetensorsSet>> OpenDir(const std::string& dir);
  const SafetensorsTensor* Find(std::string_view name) const;
  // The file a tensor came from (for error messages), or "" if unknown.
  std::string FileOf(std::string_view name) const;
  size_t num_tensors() const { return where_.size(); }
  // Every tensor of every shard, in name order (for `pagoda inspect`).
  std::vector<const SafetensorsTensor*> AllTensors() const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::string> file_names_;
  std::map<std::string, size_t, std::less<>> where_;  // tensor name -> index into files_
};

// Parses the `weight_map` of a model.safetensors.index.json: tensor name -> shard file name.
// Errors name the JSON field.
Result<std::map<std::string, std::string>> ParseSafetensorsIndex(std::string_view json_text);

// One tensor to write: raw bytes in `dtype` ("F32", "F16", "BF16", ...), row-major `shape`.
struct SafetensorsWriteTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};
// Serializes a safetensors image (header padded with spaces to a multiple of 8 bytes, tensors
// in the given order). Errors: a byte size that does not match shape x dtype, duplicate names.
Result<std::vector<uint8_t>> SerializeSafetensors(const std::vector<SafetensorsWriteTensor>& ts,
                                                  const std::map<std::string, std::string>& meta);
// Writes the same bytes to `path`: the header, then each tensor's data in turn.
Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsWriteTensor>& ts,
                        const std::map<std::string, std::string>& meta = {});

}  // namespace pagoda
