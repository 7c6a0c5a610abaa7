// GgufWriter: builds a GGUF v3 file (metadata + tensors) and writes it to disk, following the
// GGUF spec exactly (little-endian, 32-byte default alignment, tensor data padded to alignment),
// so the output loads in llama.cpp as well as in Pagoda.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/gguf.h"

namespace pagoda {

class GgufWriter {
 public:
  void AddString(const std::string& key, const std::string& value);
  void AddUint32(const std::string& key, uint32_t value);
  void AddInt32(const std::string& key, int32_t value);
  void AddFloat32(const std::string& key, float value);
  void AddBool(const std::string& key, bool value);
  void AddStringArray(const std::string& key, const std::vector<std::string>& values);
  void AddFloat32Array(const std::string& key, const std::vector<float>& values);
  void AddInt32Array(const std::string& key, const std::vector<int32_t>& values);
  // Copies any metadata value as read from another GGUF file.
  void AddValue(const std::string& key, const GgufValue& value);

  // Adds a tensor. `ne` in GGML order (ne[0] contiguous); `data` must hold exactly the bytes
  // of the tensor in `type` (moved in).
  Status AddTensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                   std::vector<uint8_t> data);

  // Writes the file (via a temporary file renamed into place).
  Status Write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  std::vector<uint8_t> header_kv_;  // encoded key/value pairs
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace pagoda
