// Chat templates: built-in renderers for the chat formats Pagoda's models use, and detection
// of which one a model's Jinja template (tokenizer.chat_template) implements.
//
// No Jinja engine: DetectChatTemplate recognises the real templates by characteristic
// substrings, and RenderChat reproduces their output for plain role/content messages:
//   kChatMl   (Qwen, SmolLM): "<|im_start|>{role}\n{content}<|im_end|>\n" per message, then
//             "<|im_start|>assistant\n" if add_generation_prompt. No default system message is
//             injected (Qwen2's template adds one; pass it explicitly if wanted).
//   kLlama3:  "<|begin_of_text|>" then "<|start_header_id|>{role}<|end_header_id|>\n\n
//             {trim(content)}<|eot_id|>" per message, then
//             "<|start_header_id|>assistant<|end_header_id|>\n\n" if add_generation_prompt.
//   kLlama2:  "<s>[INST] {strip(content)} [/INST]" per user turn, " {strip(content)} </s>" per
//             assistant turn; a leading system message becomes "<<SYS>>\n{system}\n<</SYS>>\n\n"
//             in front of the first user message. Roles must alternate user/assistant.
//   kMistral: "<s>" then "[INST] {content} [/INST]" per user turn, "{content}</s>" per
//             assistant turn (Mistral-7B-Instruct v0.1). A leading system message is prepended
//             to the first user message followed by "\n\n". Roles must alternate.
// For kLlama2 / kMistral the prompt always ends with "[/INST]" (add_generation_prompt has no
// effect). The "<s>" / "<|begin_of_text|>" text is the BOS token: encode the result without
// adding another BOS (SentencePiece tokenizers never produce "<s>" from text, so callers using
// them should strip the leading "<s>" and encode with add_bos = true instead).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pagoda {

enum class ChatTemplateKind { kChatMl, kLlama3, kLlama2, kMistral };
const char* ChatTemplateName(ChatTemplateKind kind);  // "chatml", "llama3", "llama2", "mistral"
// The inverse of ChatTemplateName; INVALID_ARGUMENT listing the known names otherwise.
Result<ChatTemplateKind> ParseChatTemplateName(std::string_view name);

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant" (ChatML / Llama 3 accept any role)
  std::string content;
};

// Recognises a Jinja chat template. Errors: InvalidArgument quoting the template's first 80
// characters when it matches none of the built-in kinds.
Result<ChatTemplateKind> DetectChatTemplate(std::string_view jinja_text);

// Renders `messages` in `kind`'s format. Errors: InvalidArgument for an empty conversation,
// an unknown role (Llama 2 / Mistral) or roles that do not alternate, naming the message index.
Result<std::string> RenderChat(ChatTemplateKind kind, const std::vector<ChatMessage>& messages,
                               bool add_generation_prompt);

// The text of the token that ends an assistant turn: "<|im_end|>", "<|eot_id|>" or "</s>".
std::string_view EndOfTurnToken(ChatTemplateKind kind);

}  // namespace pagoda
