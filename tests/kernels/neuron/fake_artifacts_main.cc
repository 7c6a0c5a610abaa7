// fake_nrt_artifacts: writes the fake runtime's artifacts (manifest.json, fake NEFFs, weights)
// for a GGUF model, so tests of another process (the `pagoda serve` end-to-end tests in
// tests/e2e) use the same writer as the in-process tests. Test-only, never installed.
//
//   fake_nrt_artifacts --model M.gguf --out DIR --bucket ID:decode|prefill:SIZE:CTX[:TPS] ...
//                      [--num-blocks N] [--block-size N] [--lnc N] [--header-lnc N]
//                      [--wrong-shape PROGRAM_ID] [--manifest-vocab N]
//
// SIZE is max_seqs (decode) or max_tokens (prefill), CTX max_ctx_blocks, TPS a decode program's
// tokens_per_seq (default 1). Exit 0 on success, 1 when the model cannot be read or DIR written,
// 2 on a usage error (each with a message on stderr).
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "model/model.h"
#include "tests/kernels/neuron/fake_artifacts.h"

namespace {

using pagoda::testing::FakeArtifactOptions;
using pagoda::testing::FakeBucket;

bool ParseInt(const std::string& text, int32_t* out) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') return false;
  *out = static_cast<int32_t>(v);
  return true;
}

// "ID:decode|prefill:SIZE:CTX_BLOCKS[:TOKENS_PER_SEQ]" (the last for decode only).
bool ParseBucket(const std::string& text, FakeBucket* b) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  for (std::string p; std::getline(ss, p, ':');) parts.push_back(p);
  if (parts.size() < 4 || parts.size() > 5 || parts[0].empty() ||
      (parts[1] != "decode" && parts[1] != "prefill") ||
      (parts.size() == 5 && parts[1] != "decode")) {
    return false;
  }
  b->id = parts[0];
  b->decode = parts[1] == "decode";
  return ParseInt(parts[2], &b->size) && ParseInt(parts[3], &b->ctx_blocks) &&
         (parts.size() == 4 || ParseInt(parts[4], &b->tokens_per_seq));
}

// Fills `o` and `out_dir` from argv; false (after a message) on a usage error.
bool ParseArgs(int argc, char** argv, FakeArtifactOptions* o, std::string* out_dir) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "error: %s needs a value\n", flag.c_str());
      return false;
    }
    const std::string value = argv[++i];
    FakeBucket b;
    bool ok = true;
    if (flag == "--model") {
      o->model_path = value;
    } else if (flag == "--out") {
      *out_dir = value;
    } else if (flag == "--bucket") {
      ok = ParseBucket(value, &b);
      o->buckets.push_back(b);
    } else if (flag == "--num-blocks") {
      ok = ParseInt(value, &o->num_blocks);
    } else if (flag == "--block-size") {
      ok = ParseInt(value, &o->block_size);
    } else if (flag == "--lnc") {
      ok = ParseInt(value, &o->lnc);
    } else if (flag == "--header-lnc") {
      ok = ParseInt(value, &o->header_lnc);
    } else if (flag == "--wrong-shape") {
      o->wrong_shape_program = value;
    } else if (flag == "--manifest-vocab") {
      ok = ParseInt(value, &o->manifest_vocab);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "error: bad argument %s %s\n", flag.c_str(), value.c_str());
      return false;
    }
  }
  if (o->model_path.empty() || out_dir->empty() || o->buckets.empty()) {
    std::fprintf(stderr, "error: --model, --out and at least one --bucket are required\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  FakeArtifactOptions o;
  std::string out_dir;
  if (!ParseArgs(argc, argv, &o, &out_dir)) return 2;
  auto model = pagoda::LoadModel(o.model_path);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().ToString().c_str());
    return 1;
  }
  o.config = (*model)->config;
  const pagoda::Status st = pagoda::testing::WriteFakeArtifacts(out_dir, o);
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
