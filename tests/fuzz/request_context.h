// The serving context the request fuzz targets validate against: a small in-memory model (a
// byte-level BPE vocabulary with ChatML's special tokens and a ChatML chat template, context
// length 64) and the limits a server would have. No engine: BuildRequest, the validation layer
// both APIs share, does not need one.
#pragma once

#include <memory>

#include "server/serving_context.h"

namespace pagoda::fuzz {

struct RequestFixture {
  std::unique_ptr<Model> model;
  ServingContext ctx;
};

// Built once per process (LLVMFuzzerInitialize); aborts if the fixture itself cannot be made.
RequestFixture& SharedRequestFixture();

}  // namespace pagoda::fuzz
