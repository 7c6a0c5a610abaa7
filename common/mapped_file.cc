#include "common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

namespace pagoda {

Result<MappedFile> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path +
                           (S_ISDIR(st.st_mode) ? ": is a directory" : ": not a regular file") +
                           " (expected a file)");
  }
  MappedFile file;
  file.size_ = static_cast<size_t>(st.st_size);
  if (file.size_ > 0) {
    void* map = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      ::close(fd);
      return Internal(path + ": mmap failed (" + std::strerror(errno) + ")");
    }
    file.data_ = map;
  }
  ::close(fd);
  return file;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

Result<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return InvalidArgument(path +
                           (S_ISDIR(st.st_mode) ? ": is a directory" : ": not a regular file") +
                           " (expected a file)");
  }
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return NotFound(path + ": cannot open");
  const std::streamoff size = in.tellg();
  if (size < 0) return DataLoss(path + ": cannot determine the size");
  if (static_cast<uint64_t>(size) > max_bytes) {
    return ResourceExhausted(path + ": " + std::to_string(size) + " bytes, over the limit");
  }
  std::string s(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(s.data(), size)) return DataLoss(path + ": read failed");
  return s;
}

}  // namespace pagoda
