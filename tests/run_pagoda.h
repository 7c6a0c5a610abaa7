// Runs the `pagoda` binary of this build (PAGODA_BIN_DIR) from tests through the shell.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/test_data.h"

namespace pagoda::testing {

struct RunResult {
  int exit_code;
  std::string out;  // stdout
};

// `s` single-quoted for the shell.
inline std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `pagoda ARGS` (ARGS is shell text) with `redirect` appended; returns the exit code
// (-1 if it did not exit normally) and stdout.
inline RunResult RunPagodaRedirected(const std::string& args, const std::string& redirect) {
  const std::string cmd = BinPath("pagoda") + " " + args + " " + redirect;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {-1, ""};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Runs `pagoda ARGS`; stderr is discarded.
inline RunResult RunPagoda(const std::string& args) {
  return RunPagodaRedirected(args, "2>/dev/null");
}

// Runs `pagoda ARGS`; stderr goes to `stderr_out`.
inline RunResult RunPagodaWithStderr(const std::string& args, std::string* stderr_out) {
  TempDir dir;
  const std::string err = dir.File("stderr.txt");
  RunResult r = RunPagodaRedirected(args, "2>" + err);
  std::ifstream in(err);
  stderr_out->assign(std::istreambuf_iterator<char>(in), {});
  return r;
}

}  // namespace pagoda::testing
