// Paths of the read-only shared test data. Tests that need it FAIL (never skip) when it is
// missing, so a green run always means the reference comparisons ran.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

namespace pagoda::testing {

inline std::string SharedPath(const std::string& rel) {
  return std::string(PAGODA_SHARED_DIR) + "/" + rel;
}

inline std::string BinPath(const std::string& name) {
  return std::string(PAGODA_BIN_DIR) + "/" + name;
}

// max |a[i] - b[i]| (in double) over spans that must be equally long.
inline double MaxAbsDiff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    d = std::max(d, std::fabs(double(a[i]) - double(b[i])));
  }
  return d;
}

// Loads a JSON file; ADD_FAILURE with the path if it cannot.
inline nlohmann::json LoadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "cannot open " << path << " (the shared test data must be beside the repo)";
    return nlohmann::json();
  }
  return nlohmann::json::parse(in);
}

// A fresh temporary directory, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pagoda-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace pagoda::testing
