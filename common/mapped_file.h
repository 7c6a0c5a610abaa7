// MappedFile: a read-only mmap of a whole regular file, unmapped when the object dies.
// Model readers (GGUF, safetensors) parse straight out of it, so weights are never copied.
// ReadSmallFile: a whole (JSON, template, ...) file read into a string, with a size limit.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"

namespace pagoda {

class MappedFile {
 public:
  // NOT_FOUND if the file cannot be opened, INVALID_ARGUMENT if it is not a regular file,
  // INTERNAL if mmap fails. Messages start with the path.
  static Result<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {static_cast<const uint8_t*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Reads all of `path`. Errors: NOT_FOUND "<path>: cannot open", INVALID_ARGUMENT "<path>: is a
// directory (expected a file)" (or another non-regular file), RESOURCE_EXHAUSTED when the
// file is over `max_bytes`, DATA_LOSS when its size cannot be determined or the read fails.
Result<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes);

}  // namespace pagoda
