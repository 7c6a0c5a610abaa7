// BuildRequest, the translation layer every API shares: the input kinds, max_tokens defaults
// and limits, stop ids, and the errors naming the field. (Chat rendering: see
// generation_service_test.cc.)
#include "server/api_request.h"

#include <gtest/gtest.h>

#include <random>

#include "model/model.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

// A byte-level BPE vocabulary (the 256 bytes, no merges) plus BOS, which is added by default;
// a 64-token context.
std::unique_ptr<Model> MakeByteModel() {
  BpeVocab v;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(ByteLevelEncode(std::string(1, static_cast<char>(b))));
    v.kinds.push_back(TokenKind::kNormal);
  }
  v.tokens.push_back("<s>");
  v.kinds.push_back(TokenKind::kControl);
  v.bos_id = 256;
  v.add_bos = true;
  auto model = std::make_unique<Model>();
  auto tok = MakeBpeTokenizer(std::move(v));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  if (tok.ok()) model->tokenizer = std::move(tok).value();
  model->config.context_length = 64;
  return model;
}

class BuildRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = MakeByteModel();
    ASSERT_NE(model_->tokenizer, nullptr);
    ctx_.model = model_.get();
  }
  std::unique_ptr<Model> model_;
  ServingContext ctx_;
};

TEST_F(BuildRequestTest, PromptTextAndTokenIds) {
  ApiRequest api;
  api.input = ApiInput::kPrompt;
  api.prompt = "hi";
  api.max_tokens = 4;
  Result<Request> r = BuildRequest(ctx_, api);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompt_token_ids, (std::vector<int32_t>{256, 'h', 'i'}));  // BOS by default
  EXPECT_EQ(r->request_id, "req-0");
  api.add_special_tokens = false;
  EXPECT_EQ(BuildRequest(ctx_, api)->prompt_token_ids, (std::vector<int32_t>{'h', 'i'}));
  EXPECT_EQ(BuildRequest(ctx_, api)->request_id, "req-2");  // one counter per context

  ApiRequest ids;
  ids.input = ApiInput::kPromptTokenIds;
  ids.prompt_token_ids = {5, 6};
  ids.request_id = "mine";
  ids.stop_token_ids = {9};
  ids.priority = -3;
  r = BuildRequest(ctx_, ids);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompt_token_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(r->request_id, "mine");
  EXPECT_EQ(r->stopping.stop_token_ids, std::vector<int32_t>{9});
  EXPECT_EQ(r->priority, -3);
}

TEST_F(BuildRequestTest, MaxTokensDefaultsToTheRoomLeftAndIsLimited) {
  ApiRequest api;
  api.input = ApiInput::kPromptTokenIds;
  api.prompt_token_ids = std::vector<int32_t>(10, 7);
  EXPECT_EQ(BuildRequest(ctx_, api)->stopping.max_tokens, 54);  // 64 - 10
  ctx_.max_tokens_limit = 20;
  EXPECT_EQ(BuildRequest(ctx_, api)->stopping.max_tokens, 20);
  api.max_tokens = 21;
  EXPECT_EQ(BuildRequest(ctx_, api).status().message(), "max_tokens: 21 (expected 1..20)");
  api.max_tokens = 0;
  EXPECT_EQ(BuildRequest(ctx_, api).status().message(), "max_tokens: 0 (expected 1..20)");
  // A prompt filling the context still asks for one token (the engine rejects the prompt).
  ctx_.max_tokens_limit = 0;
  api.max_tokens.reset();
  api.prompt_token_ids = std::vector<int32_t>(64, 7);
  EXPECT_EQ(BuildRequest(ctx_, api)->stopping.max_tokens, 1);
}

TEST_F(BuildRequestTest, ErrorsNameTheField) {
  ApiRequest api;
  EXPECT_EQ(BuildRequest(ctx_, api).status().message(),
            "input: set prompt, prompt_token_ids or messages");
  api.input = ApiInput::kPrompt;
  EXPECT_EQ(BuildRequest(ctx_, api).status().message(), "prompt: empty");
  api.input = ApiInput::kPromptTokenIds;
  EXPECT_EQ(BuildRequest(ctx_, api).status().message(), "prompt_token_ids: empty");
  api.input = ApiInput::kMessages;
  EXPECT_EQ(BuildRequest(ctx_, api).status().message(), "messages: empty");
}

// A request id is echoed in every message and in gRPC metadata: a 262 KB id (67 MB streamed
// back) or an 8 KB one (past the metadata limit: a duplicate killed every stream of its
// connection) is refused up front, and the error does not echo it.
TEST_F(BuildRequestTest, RequestIdIsBoundedAndPrintable) {
  ApiRequest api;
  api.input = ApiInput::kPromptTokenIds;
  api.prompt_token_ids = {5};
  for (size_t size : {size_t{262144}, size_t{8192}, kMaxRequestIdBytes + 1}) {
    api.request_id.assign(size, 'x');
    const Status st = BuildRequest(ctx_, api).status();
    EXPECT_EQ(st.message(), "request_id: " + std::to_string(size) +
                                " bytes (at most 256 printable ASCII characters)");
  }
  api.request_id.assign(kMaxRequestIdBytes, 'x');
  EXPECT_TRUE(BuildRequest(ctx_, api).ok());
  api.request_id = "a\nb";
  EXPECT_EQ(BuildRequest(ctx_, api).status().message(),
            "request_id: byte 10 is not printable ASCII (0x20..0x7e)");
  api.request_id = "caf\xc3\xa9";
  EXPECT_EQ(BuildRequest(ctx_, api).status().code(), StatusCode::kInvalidArgument);
}

// Prompt text that cannot fit the context is refused by its size, before tokenizing.
TEST_F(BuildRequestTest, OverlongPromptTextIsRefusedBeforeTokenizing) {
  ctx_.max_prompt_bytes = MaxPromptBytes(*model_->tokenizer, 64);
  EXPECT_EQ(ctx_.max_prompt_bytes, 4 * 4 * 64);  // pieces of at most 3 bytes; 4 for unknowns
  ApiRequest api;
  api.input = ApiInput::kPrompt;
  api.max_tokens = 1;
  api.prompt.assign(10 << 20, 'a');
  EXPECT_EQ(BuildRequest(ctx_, api).status().message(),
            "prompt: 10485760 bytes cannot fit the context (at most 1024 bytes of text can)");
  api.prompt.assign(1024, 'a');  // at the bound: tokenized (the engine judges the token count)
  EXPECT_TRUE(BuildRequest(ctx_, api).ok());
}

// The bound never refuses text that fits: over random texts for a real SentencePiece and a
// llama.cpp-written tokenizer, n tokens never stand for more than MaxPromptBytes(n) bytes.
TEST(MaxPromptBytes, IsSoundForRealTokenizers) {
  const std::vector<std::string> paths = {
      testing::SharedPath("models/aidreams260K/aidreams260K-f32.gguf"),
      testing::SharedPath("models/synth-gqa/llama-gqa-f32.gguf")};
  int checked = 0;
  for (const std::string& path : paths) {
    auto model = LoadModel(path);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const Tokenizer& tok = *(*model)->tokenizer;
    std::mt19937 rng(1);
    const char* alphabet[] = {
        "a", "e", "th", " ", "  ", "\n", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
        "Z", "0", "."};
    for (int i = 0; i < 50; ++i) {
      std::string text;
      const int len = 1 + static_cast<int>(rng() % 400);
      for (int j = 0; j < len; ++j) text += alphabet[rng() % std::size(alphabet)];
      const auto ids = tok.Encode(text, false);
      ASSERT_FALSE(ids.empty());
      EXPECT_LE(static_cast<int64_t>(text.size()),
                MaxPromptBytes(tok, static_cast<int32_t>(ids.size())))
          << path;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

}  // namespace
}  // namespace pagoda
