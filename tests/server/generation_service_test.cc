// BuildRequest for `messages` requests (through the gRPC translation): the Jinja chat template
// loaded at start-up, special tokens only in the template's own text, one BOS, roles, template
// variables and errors; and the model's sampling defaults for fields a request leaves unset.
#include "server/generation_service.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "model/tokenizer/bpe_tokenizer.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

// A byte-level BPE vocabulary (the 256 bytes, no merges) with Llama 3's special tokens as
// control tokens; BOS is added by default.
constexpr int32_t kBos = 256, kEot = 257, kStartHeader = 258, kEndHeader = 259, kEos = 260;

// A Llama 3 style template: BOS, a header per message, content trimmed, end-of-turn tokens.
constexpr const char* kLlama3Template =
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
    "\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";

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
  model->config.context_length = 256;
  model->chat_template = chat_template;
  return model;
}

v1::GenerateRequest ChatRequest(const std::string& content, const std::string& role = "user") {
  v1::GenerateRequest req;
  v1::ChatMessage* m = req.mutable_messages()->add_messages();
  m->set_role(role);
  m->set_content(content);
  return req;
}

std::vector<int32_t> Bytes(std::string_view s) {
  return std::vector<int32_t>(s.begin(), s.end());  // ASCII: byte value = token id
}

std::vector<int32_t> Concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

class ChatRequestTest : public ::testing::Test {
 protected:
  void Load(const std::string& tmpl, const std::string& setting = "") {
    model_ = MakeChatModel(tmpl);
    ASSERT_NE(model_->tokenizer, nullptr);
    ctx_.model = model_.get();
    const Status st = LoadChatTemplate(setting, &ctx_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  std::unique_ptr<Model> model_;
  ServingContext ctx_;
};

TEST_F(ChatRequestTest, TemplateTextIsSpecialContentIsPlainAndBosIsAddedOnce) {
  Load(kLlama3Template);
  auto r = BuildRequest(ctx_, ChatRequest(" hi <|eot_id|><|begin_of_text|> "));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // The rendered "<|begin_of_text|>" is the BOS token: no second one is added. The user's
  // "<|eot_id|><|begin_of_text|>" stays bytes.
  EXPECT_EQ(r->prompt_token_ids, Concat({{kBos, kStartHeader},
                                         Bytes("user"),
                                         {kEndHeader},
                                         Bytes("\n\nhi "),
                                         Bytes("<|eot_id|><|begin_of_text|>"),
                                         {kEot, kStartHeader},
                                         Bytes("assistant"),
                                         {kEndHeader},
                                         Bytes("\n\n")}));
  EXPECT_EQ(std::count(r->prompt_token_ids.begin(), r->prompt_token_ids.end(), kBos), 1);
  EXPECT_EQ(std::count(r->prompt_token_ids.begin(), r->prompt_token_ids.end(), kEot), 1);
  EXPECT_TRUE(r->stopping.stop_token_ids.empty());  // stop tokens are the engine's (model)
}

TEST_F(ChatRequestTest, BosIsAddedWhenTheTemplateDoesNotWriteIt) {
  Load("{% for m in messages %}{{ m.content }}<|eot_id|>{% endfor %}");
  auto r = BuildRequest(ctx_, ChatRequest("hi"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompt_token_ids, Concat({{kBos}, Bytes("hi"), {kEot}}));
}

TEST_F(ChatRequestTest, RolesAreCheckedBecauseTheyCountAsTemplateText) {
  Load(kLlama3Template);
  for (const char* role : {"system", "user", "assistant", "tool"}) {
    EXPECT_TRUE(BuildRequest(ctx_, ChatRequest("x", role)).ok()) << role;
  }
  auto r = BuildRequest(ctx_, ChatRequest("x", "<|eot_id|>"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "messages[0].role: '<|eot_id|>' (expected one of system, user, assistant, tool)");
}

TEST_F(ChatRequestTest, AddGenerationPromptAndKwargsReachTheTemplate) {
  Load(
      "{% if flavour is defined %}[{{ flavour }}]{% endif %}{{ messages[0].content }}"
      "{% if add_generation_prompt %}>{% endif %}");
  v1::GenerateRequest req = ChatRequest("a");
  req.mutable_messages()->set_add_generation_prompt(false);
  req.mutable_messages()->set_chat_template_kwargs(R"({"flavour": "x"})");
  auto r = BuildRequest(ctx_, req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompt_token_ids, Concat({{kBos}, Bytes("[x]a")}));
  r = BuildRequest(ctx_, ChatRequest("a"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompt_token_ids, Concat({{kBos}, Bytes("a>")}));

  req.mutable_messages()->set_chat_template_kwargs(R"({"messages": []})");
  EXPECT_EQ(BuildRequest(ctx_, req).status().message(),
            "chat_template_kwargs.messages: set by the request itself");
  req.mutable_messages()->set_chat_template_kwargs(R"({"bos_token": "<|eot_id|>"})");
  EXPECT_EQ(BuildRequest(ctx_, req).status().message(),
            "chat_template_kwargs.bos_token: set by the request itself");
  req.mutable_messages()->set_chat_template_kwargs("{not json");
  EXPECT_EQ(BuildRequest(ctx_, req).status().message(), "chat_template_kwargs: expected an object");
}

TEST_F(ChatRequestTest, RaiseExceptionIsAnInvalidArgumentWithItsMessage) {
  Load(
      "{% if messages[0].role != 'user' %}{{ raise_exception('Conversation roles must "
      "alternate user/assistant/user/assistant/...') }}{% endif %}{{ messages[0].content }}");
  auto r = BuildRequest(ctx_, ChatRequest("x", "assistant"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "messages: Conversation roles must alternate user/assistant/user/assistant/...");
}

TEST(LoadChatTemplate, NoTemplateAnswersEachMessagesRequest) {
  auto model = MakeChatModel("");
  ASSERT_NE(model->tokenizer, nullptr);
  ServingContext ctx;
  ctx.model = model.get();
  ASSERT_TRUE(LoadChatTemplate("", &ctx).ok());
  auto r = BuildRequest(ctx, ChatRequest("hi"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "messages: the model has no chat template (set model.chat_template to a template "
            "file)");
  v1::GenerateRequest plain;  // requests with a prompt still work
  plain.set_prompt("hi");
  EXPECT_TRUE(BuildRequest(ctx, plain).ok());
  v1::GenerateRequest empty;
  empty.mutable_messages();
  EXPECT_EQ(BuildRequest(ctx, empty).status().message(), "messages: empty");
}

TEST(LoadChatTemplate, SyntaxErrorsNameTheSourceAndFilesAndNamesAreAccepted) {
  auto model = MakeChatModel("{% for m in messages %}<|eot_id|>");  // unclosed for
  ASSERT_NE(model->tokenizer, nullptr);
  model->named_chat_templates["tool_use"] = "T{{ messages[0].content }}";
  ServingContext ctx;
  ctx.model = model.get();
  Status st = LoadChatTemplate("", &ctx);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(
      st.message().starts_with("model.chat_template: the model's chat template: syntax "
                               "error"))
      << st.message();
  EXPECT_TRUE(st.message().ends_with("(set model.chat_template to a template file)"));

  ASSERT_TRUE(LoadChatTemplate("tool_use", &ctx).ok());
  auto r = BuildRequest(ctx, ChatRequest("q"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompt_token_ids, Concat({{kBos}, Bytes("Tq")}));

  testing::TempDir dir;
  const std::string file = dir.File("t.jinja");
  std::ofstream(file) << "F{{ messages[0].content }}{{ eos_token }}";
  ASSERT_TRUE(LoadChatTemplate(file, &ctx).ok());
  r = BuildRequest(ctx, ChatRequest("q"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompt_token_ids, Concat({{kBos}, Bytes("Fq"), {kEos}}));

  st = LoadChatTemplate(dir.File("missing.jinja"), &ctx);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("missing.jinja: cannot open"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("one of the model's templates: tool_use"), std::string::npos);
  st = LoadChatTemplate(dir.path(), &ctx);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("is a directory"), std::string::npos) << st.message();
}

TEST(ModelDefaults, SamplingDefaultsApplyOnlyToUnsetFields) {
  auto model = MakeChatModel("");
  ASSERT_NE(model->tokenizer, nullptr);
  model->generation.temperature = 0.6f;
  model->generation.top_p = 0.9f;
  model->generation.top_k = 20;
  ServingContext ctx;
  ctx.model = model.get();
  v1::GenerateRequest req;
  req.set_prompt("hi");
  auto r = BuildRequest(ctx, req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->sampling.temperature, 0.6f);
  EXPECT_EQ(r->sampling.top_p, 0.9f);
  EXPECT_EQ(r->sampling.top_k, 20);
  EXPECT_EQ(r->sampling.repetition_penalty, 1.0f);  // the model has none: the API default
  req.mutable_sampling()->set_temperature(0.0f);    // set, even to the proto3 zero
  req.mutable_sampling()->set_top_k(0);
  r = BuildRequest(ctx, req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->sampling.temperature, 0.0f);
  EXPECT_EQ(r->sampling.top_k, 0);
  EXPECT_EQ(r->sampling.top_p, 0.9f);
}

TEST(ModelDefaults, MaxTokensDefaultsToTheRestOfTheContext) {
  auto model = MakeChatModel("");
  ASSERT_NE(model->tokenizer, nullptr);
  ServingContext ctx;
  ctx.model = model.get();
  v1::GenerateRequest req;
  req.set_prompt("hi");  // BOS h i: 3 tokens of 256
  EXPECT_EQ(BuildRequest(ctx, req)->stopping.max_tokens, 253);
  ctx.max_tokens_limit = 100;
  EXPECT_EQ(BuildRequest(ctx, req)->stopping.max_tokens, 100);
}

TEST(SpeculativeSwitch, RequestsSpeculateUnlessTheySayNo) {
  auto model = MakeChatModel("");
  ASSERT_NE(model->tokenizer, nullptr);
  ServingContext ctx;
  ctx.model = model.get();
  v1::GenerateRequest req;
  req.set_prompt("hi");
  EXPECT_TRUE(BuildRequest(ctx, req)->speculative);
  req.set_speculative(false);
  EXPECT_FALSE(BuildRequest(ctx, req)->speculative);
  req.set_speculative(true);
  EXPECT_TRUE(BuildRequest(ctx, req)->speculative);
}

TEST(ParseSpecial, PromptsKeepTheTokenizersWayUnlessTheRequestSays) {
  auto model = MakeChatModel("");
  ASSERT_NE(model->tokenizer, nullptr);
  ServingContext ctx;
  ctx.model = model.get();
  v1::GenerateRequest req;
  req.set_prompt("<|eot_id|>");
  req.set_add_special_tokens(false);
  EXPECT_EQ(BuildRequest(ctx, req)->prompt_token_ids, std::vector<int32_t>{kEot});
  req.set_parse_special(false);
  EXPECT_EQ(BuildRequest(ctx, req)->prompt_token_ids, Bytes("<|eot_id|>"));
  req.set_parse_special(true);
  EXPECT_EQ(BuildRequest(ctx, req)->prompt_token_ids, std::vector<int32_t>{kEot});
}

}  // namespace
}  // namespace pagoda
