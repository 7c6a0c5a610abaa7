#include "model/chat_template.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse."}, {"user", "Hi!"}, {"assistant", " Hello. "}, {"user", "2+2?"}};

TEST(ChatTemplate, ChatMl) {
  auto s = RenderChat(ChatTemplateKind::kChatMl, kConversation, true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s,
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\n Hello. <|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(*RenderChat(ChatTemplateKind::kChatMl, {{"user", "x"}}, false),
            "<|im_start|>user\nx<|im_end|>\n");
  EXPECT_EQ(EndOfTurnToken(ChatTemplateKind::kChatMl), "<|im_end|>");
}

TEST(ChatTemplate, Llama3) {
  auto s = RenderChat(ChatTemplateKind::kLlama3, kConversation, true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are "
            "terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(EndOfTurnToken(ChatTemplateKind::kLlama3), "<|eot_id|>");
}

TEST(ChatTemplate, Llama2) {
  auto s = RenderChat(ChatTemplateKind::kLlama2, kConversation, true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s,
            "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi! [/INST] Hello. </s>"
            "<s>[INST] 2+2? [/INST]");
  EXPECT_EQ(*RenderChat(ChatTemplateKind::kLlama2, {{"user", " Hi "}}, true),
            "<s>[INST] Hi [/INST]");
  EXPECT_EQ(EndOfTurnToken(ChatTemplateKind::kLlama2), "</s>");
}

TEST(ChatTemplate, Mistral) {
  auto s = RenderChat(ChatTemplateKind::kMistral, kConversation, true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, "<s>[INST] You are terse.\n\nHi! [/INST] Hello. </s>[INST] 2+2? [/INST]");
  EXPECT_EQ(*RenderChat(ChatTemplateKind::kMistral, {{"user", "a"}, {"assistant", "b"}}, false),
            "<s>[INST] a [/INST]b</s>");
}

TEST(ChatTemplate, Errors) {
  EXPECT_FALSE(RenderChat(ChatTemplateKind::kChatMl, {}, true).ok());
  auto bad = RenderChat(ChatTemplateKind::kLlama2, {{"user", "a"}, {"user", "b"}}, true);
  EXPECT_NE(bad.status().message().find("messages[1].role"), std::string::npos);
  EXPECT_FALSE(RenderChat(ChatTemplateKind::kMistral, {{"system", "s"}}, true).ok());
}

TEST(ChatTemplate, DetectsRealTemplates) {
  // Excerpts of the published templates.
  const char* qwen =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
      "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}";
  const char* llama3 =
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
      "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] "
      "| trim + '<|eot_id|>' %}";
  const char* llama2 =
      "{% if messages[0]['role'] == 'system' %}{% set content = '<<SYS>>\\n' + system_message "
      "+ '\\n<</SYS>>\\n\\n' + message['content'] %}{{ bos_token + '[INST] ' + content.strip() "
      "+ ' [/INST]' }}";
  const char* mistral =
      "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] "
      "' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
      "message['content'] + eos_token}}{% endif %}{% endfor %}";
  EXPECT_EQ(*DetectChatTemplate(qwen), ChatTemplateKind::kChatMl);
  EXPECT_EQ(*DetectChatTemplate(llama3), ChatTemplateKind::kLlama3);
  EXPECT_EQ(*DetectChatTemplate(llama2), ChatTemplateKind::kLlama2);
  EXPECT_EQ(*DetectChatTemplate(mistral), ChatTemplateKind::kMistral);
  const std::string unknown =
      "{% for m in messages %}<start_of_turn>{{ m.role }}\n" + std::string(100, 'x');
  auto st = DetectChatTemplate(unknown);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("<start_of_turn>"), std::string::npos);
  EXPECT_EQ(st.status().message().find(std::string(90, 'x')), std::string::npos);
}

}  // namespace
}  // namespace pagoda
