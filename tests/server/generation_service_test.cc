// BuildRequest for `messages` requests: the chat template resolved at start-up, the rendered
// BOS string becoming the BOS token, the end-of-turn token as a stop token, and the errors.
#include "server/generation_service.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "model/tokenizer/bpe_tokenizer.h"

namespace pagoda {
namespace {

// A byte-level BPE vocabulary (the 256 bytes, no merges) with Llama 3's special tokens, which
// the tokenizer matches in text; BOS is added by default.
constexpr int32_t kBos = 256, kEot = 257, kEos = 260;

std::unique_ptr<Model> MakeChatModel(const std::string& chat_template) {
  BpeVocab v;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(ByteLevelEncode(std::string(1, static_cast<char>(b))));
    v.kinds.push_back(TokenKind::kNormal);
  }
  for (const char* special : {"<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>",
                              "<|end_header_id|>", "<|end_of_text|>"}) {
    v.tokens.push_back(special);
    v.kinds.push_back(TokenKind::kControl);
  }
  v.bos_id = kBos;
  v.eos_id = kEos;
  v.add_bos = true;
  auto model = std::make_unique<Model>();
  auto tok = MakeBpeTokenizer(std::move(v));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  if (tok.ok()) model->tokenizer = std::move(tok).value();
  model->config.context_length = 64;
  model->chat_template = chat_template;
  return model;
}

v1::GenerateRequest ChatRequest() {
  v1::GenerateRequest req;
  v1::ChatMessage* m = req.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  return req;
}

TEST(BuildChatRequest, RenderedBosBecomesOneBosTokenAndEndOfTurnStops) {
  auto model = MakeChatModel(
      "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}{{ '<|eot_id|>' }}");
  ASSERT_NE(model->tokenizer, nullptr);
  ServingContext ctx;
  ctx.model = model.get();
  ResolveChatTemplate("", &ctx);
  ASSERT_TRUE(ctx.chat_template.ok()) << ctx.chat_template.status().ToString();
  EXPECT_EQ(*ctx.chat_template, ChatTemplateKind::kLlama3);
  EXPECT_EQ(ctx.end_of_turn_id, kEot);

  auto r = BuildRequest(ctx, ChatRequest());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // "<|begin_of_text|>" is stripped from the text and becomes the one BOS (encoding it as well
  // as adding BOS would give two).
  const std::string body =
      "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(r->prompt_token_ids, model->tokenizer->Encode(body, true));
  EXPECT_EQ(std::count(r->prompt_token_ids.begin(), r->prompt_token_ids.end(), kBos), 1);
  EXPECT_EQ(r->stopping.stop_token_ids, std::vector<int32_t>{kEot});

  // Stop ids of the request come after the end-of-turn token.
  v1::GenerateRequest req = ChatRequest();
  req.mutable_stopping()->add_stop_token_ids(7);
  auto r2 = BuildRequest(ctx, req);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->stopping.stop_token_ids, (std::vector<int32_t>{kEot, 7}));
}

TEST(BuildChatRequest, EndOfTurnThatIsNotOneTokenIsNoStopToken) {
  auto model = MakeChatModel("");
  ASSERT_NE(model->tokenizer, nullptr);
  ServingContext ctx;
  ctx.model = model.get();
  ResolveChatTemplate("chatml", &ctx);  // "<|im_end|>" is not in the vocabulary
  ASSERT_TRUE(ctx.chat_template.ok()) << ctx.chat_template.status().ToString();
  EXPECT_EQ(ctx.end_of_turn_id, -1);
  auto r = BuildRequest(ctx, ChatRequest());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->stopping.stop_token_ids.empty());
  EXPECT_EQ(r->prompt_token_ids.front(), kBos);  // nothing to strip: BOS added by default
}

TEST(BuildChatRequest, TemplateErrorsAnswerEachMessagesRequest) {
  auto model = MakeChatModel("");
  ASSERT_NE(model->tokenizer, nullptr);
  ServingContext ctx;
  ctx.model = model.get();
  ResolveChatTemplate("", &ctx);
  auto r = BuildRequest(ctx, ChatRequest());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "messages: the model has no chat template (set model.chat_template)");
  // Requests with a prompt still work.
  v1::GenerateRequest plain;
  plain.set_prompt("hi");
  EXPECT_TRUE(BuildRequest(ctx, plain).ok());
  // An empty conversation is reported first.
  auto empty = BuildRequest(ctx, [] {
    v1::GenerateRequest req;
    req.mutable_messages();
    return req;
  }());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "messages: empty");

  model->chat_template = "{% for m in messages %}<start_of_turn>{{ m.role }}";
  ResolveChatTemplate("", &ctx);
  r = BuildRequest(ctx, ChatRequest());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().message().starts_with("messages: ")) << r.status().message();
  EXPECT_NE(r.status().message().find("<start_of_turn>"), std::string::npos);
}

}  // namespace
}  // namespace pagoda
