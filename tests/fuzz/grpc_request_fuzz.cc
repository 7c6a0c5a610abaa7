// Fuzz target: gRPC request validation -- mutated GenerateRequest protobuf bytes parsed as
// gRPC would, then through BuildRequest, the validation layer shared with the HTTP API.
#include "server/generation_service.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/request_context.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)pagoda::fuzz::SharedRequestFixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagoda;
  v1::GenerateRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return 0;
  (void)BuildRequest(fuzz::SharedRequestFixture().ctx, req);
  return 0;
}
