// BuildRequest, the translation layer every API shares: the input kinds, max_tokens defaults
// and limits, stop ids, and the errors naming the field. (Chat rendering: see
// generation_service_test.cc.)
#include "server/api_request.h"

#include <gtest/gtest.h>

#include "model/tokenizer/bpe_tokenizer.h"

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

}  // namespace
}  // namespace pagoda
