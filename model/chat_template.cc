#include "model/chat_template.h"

namespace pagoda {
namespace {

bool Contains(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

// Python's str.strip() for ASCII whitespace (what the Jinja templates' trim / strip do).
std::string Strip(std::string_view s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(ws);
  return std::string(s.substr(b, e - b + 1));
}

std::string RenderChatMl(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string RenderLlama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out = "<|begin_of_text|>";
  for (const ChatMessage& m : messages) {
    out +=
        "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + Strip(m.content) + "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Splits off a leading system message and checks the rest alternate user/assistant.
Status SplitInstTurns(const std::vector<ChatMessage>& messages, std::string* system,
                      size_t* first) {
  *first = 0;
  if (!messages.empty() && messages[0].role == "system") {
    *system = messages[0].content;
    *first = 1;
  }
  for (size_t i = *first; i < messages.size(); ++i) {
    const char* want = (i - *first) % 2 == 0 ? "user" : "assistant";
    if (messages[i].role != want) {
      return InvalidArgument("messages[" + std::to_string(i) + "].role: '" + messages[i].role +
                             "', expected '" + want +
                             "' (roles must alternate user/assistant after an optional system)");
    }
  }
  if (*first == messages.size()) return InvalidArgument("messages: no user message");
  return Status::Ok();
}

Result<std::string> RenderLlama2(const std::vector<ChatMessage>& messages) {
  std::string system;
  size_t first = 0;
  PAGODA_RETURN_IF_ERROR(SplitInstTurns(messages, &system, &first));
  std::string out;
  for (size_t i = first; i < messages.size(); ++i) {
    std::string content = messages[i].content;
    if (i == first && first == 1) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
    if (messages[i].role == "user") {
      out += "<s>[INST] " + Strip(content) + " [/INST]";
    } else {
      out += " " + Strip(content) + " </s>";
    }
  }
  return out;
}

Result<std::string> RenderMistral(const std::vector<ChatMessage>& messages) {
  std::string system;
  size_t first = 0;
  PAGODA_RETURN_IF_ERROR(SplitInstTurns(messages, &system, &first));
  std::string out = "<s>";
  for (size_t i = first; i < messages.size(); ++i) {
    std::string content = messages[i].content;
    if (i == first && first == 1) content = system + "\n\n" + content;
    if (messages[i].role == "user") {
      out += "[INST] " + content + " [/INST]";
    } else {
      out += content + "</s>";
    }
  }
  return out;
}

}  // namespace

Result<ChatTemplateKind> ParseChatTemplateName(std::string_view name) {
  for (ChatTemplateKind k : {ChatTemplateKind::kChatMl, ChatTemplateKind::kLlama3,
                             ChatTemplateKind::kLlama2, ChatTemplateKind::kMistral}) {
    if (name == ChatTemplateName(k)) return k;
  }
  return InvalidArgument("chat template '" + std::string(name) +
                         "' is not built in (expected chatml, llama3, llama2 or mistral)");
}

const char* ChatTemplateName(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kChatMl:
      return "chatml";
    case ChatTemplateKind::kLlama3:
      return "llama3";
    case ChatTemplateKind::kLlama2:
      return "llama2";
    case ChatTemplateKind::kMistral:
      return "mistral";
  }
  return "unknown";
}

Result<ChatTemplateKind> DetectChatTemplate(std::string_view t) {
  if (Contains(t, "<|start_header_id|>") && Contains(t, "<|eot_id|>")) {
    return ChatTemplateKind::kLlama3;
  }
  if (Contains(t, "<|im_start|>") && Contains(t, "<|im_end|>")) return ChatTemplateKind::kChatMl;
  if (Contains(t, "[INST]") && Contains(t, "[/INST]")) {
    return Contains(t, "<<SYS>>") ? ChatTemplateKind::kLlama2 : ChatTemplateKind::kMistral;
  }
  std::string head(t.substr(0, 80));
  for (char& c : head) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return InvalidArgument("chat template '" + head + (t.size() > 80 ? "...'" : "'") +
                         " is not recognised (expected ChatML, Llama 3, Llama 2 or Mistral)");
}

Result<std::string> RenderChat(ChatTemplateKind kind, const std::vector<ChatMessage>& messages,
                               bool add_generation_prompt) {
  if (messages.empty()) return InvalidArgument("messages: empty conversation");
  switch (kind) {
    case ChatTemplateKind::kChatMl:
      return RenderChatMl(messages, add_generation_prompt);
    case ChatTemplateKind::kLlama3:
      return RenderLlama3(messages, add_generation_prompt);
    case ChatTemplateKind::kLlama2:
      return RenderLlama2(messages);
    case ChatTemplateKind::kMistral:
      return RenderMistral(messages);
  }
  return InvalidArgument("chat template kind: unknown");
}

std::string_view EndOfTurnToken(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kChatMl:
      return "<|im_end|>";
    case ChatTemplateKind::kLlama3:
      return "<|eot_id|>";
    case ChatTemplateKind::kLlama2:
    case ChatTemplateKind::kMistral:
      return "</s>";
  }
  return "";
}

}  // namespace pagoda
