// Writes a manifest.json plus fake NEFFs (1024-byte header + JSON program description) for the
// fake libnrt, from a model and a list of buckets. Test-only.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "model/model_config.h"

namespace pagoda::testing {

struct FakeBucket {
  std::string id;
  bool decode = true;
  int32_t size = 1;  // decode: max_seqs; prefill: max_tokens
  int32_t ctx_blocks = 8;
  int32_t tokens_per_seq = 1;  // decode only
};

struct FakeArtifactOptions {
  std::string model_path;  // GGUF the fake runs
  ModelConfig config;
  int32_t num_blocks = 64;
  int32_t block_size = 16;
  std::string kv_dtype = "f32";
  int32_t lnc = 2;         // manifest lnc
  int32_t header_lnc = 2;  // NEFF header lnc_size
  std::vector<FakeBucket> buckets;
  std::string wrong_shape_program;  // this program's NEFF declares input_ids one token longer
  int32_t manifest_vocab = 0;       // != 0: write this vocab in the manifest
};

// Creates `dir`/manifest.json, `dir`/<id>.neff and `dir`/weights.bin.
Status WriteFakeArtifacts(const std::string& dir, const FakeArtifactOptions& options);

}  // namespace pagoda::testing
