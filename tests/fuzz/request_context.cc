#include "tests/fuzz/request_context.h"

#include <cstdio>
#include <cstdlib>

#include "model/tokenizer/bpe_tokenizer.h"

namespace pagoda::fuzz {
namespace {

constexpr char kChatMlTemplate[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::unique_ptr<Model> MakeModel() {
  BpeVocab v;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(ByteLevelEncode(std::string(1, static_cast<char>(b))));
    v.kinds.push_back(TokenKind::kNormal);
  }
  for (const char* special : {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}) {
    v.tokens.push_back(special);
    v.kinds.push_back(TokenKind::kControl);
  }
  v.eos_id = 258;
  auto tok = MakeBpeTokenizer(std::move(v));
  if (!tok.ok()) {
    std::fprintf(stderr, "fuzz fixture: %s\n", tok.status().ToString().c_str());
    std::abort();
  }
  auto model = std::make_unique<Model>();
  model->tokenizer = std::move(tok).value();
  model->config.context_length = 64;
  model->config.vocab_size = model->tokenizer->vocab_size();
  model->chat_template = kChatMlTemplate;
  return model;
}

}  // namespace

RequestFixture& SharedRequestFixture() {
  static RequestFixture* fixture = [] {
    auto* f = new RequestFixture;
    f->model = MakeModel();
    f->ctx.model = f->model.get();
    f->ctx.model_name = "fuzz";
    f->ctx.max_tokens_limit = 32;
    if (Status st = LoadChatTemplate("", &f->ctx); !st.ok() || !f->ctx.chat_template.ok()) {
      std::fprintf(stderr, "fuzz fixture: the chat template: %s\n", st.ToString().c_str());
      std::abort();
    }
    return f;
  }();
  return *fixture;
}

}  // namespace pagoda::fuzz
