// Fuzz target: the OpenAI HTTP request parser (first byte even: /v1/completions, odd:
// /v1/chat/completions; the rest is the JSON body), then BuildRequest on what parsed.
#include "server/openai_protocol.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/request_context.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)pagoda::fuzz::SharedRequestFixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagoda;
  if (size == 0) return 0;
  const auto endpoint =
      data[0] % 2 == 0 ? OpenAiEndpoint::kCompletions : OpenAiEndpoint::kChatCompletions;
  auto parsed = ParseOpenAiRequest(endpoint, fuzz::AsText(data + 1, size - 1));
  if (!parsed.ok()) {
    (void)OpenAiErrorBody(parsed.status());
    return 0;
  }
  (void)BuildRequest(fuzz::SharedRequestFixture().ctx, parsed->api);
  return 0;
}
