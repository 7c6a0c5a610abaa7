// End-to-end tests of `pagoda render-template`: the reference chat templates render through
// the binary byte for byte, raise_exception fails with its message, --json gives segments and
// (with --model) token ids, --now fixes the clock, bad arguments are refused.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/run_pagoda.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

using Json = nlohmann::ordered_json;
using testing::Quote;
using testing::RunPagoda;
using testing::RunPagodaWithStderr;
using testing::SharedPath;
using testing::TempDir;

Json Cases() {
  std::ifstream in(SharedPath("chat-templates/cases.json"));
  EXPECT_TRUE(in.good()) << "the shared chat-template corpus is missing";
  return Json::parse(in);
}

std::string WriteJson(const TempDir& dir, const std::string& name, const Json& j) {
  std::ofstream(dir.File(name), std::ios::binary) << j.dump();
  return dir.File(name);
}

std::string TemplatePath(const std::string& name) {
  return SharedPath("chat-templates/" + name + ".jinja");
}

// One rendered and one failing case per template, through the binary.
TEST(CliRenderTemplate, ReferenceTemplatesRenderExactly) {
  TempDir dir;
  std::map<std::string, int> seen;
  int checked = 0;
  for (const auto& c : Cases()) {
    const std::string name = c["template"], id = c["id"];
    const bool raises = c.contains("expected_error");
    if (seen[name] & (raises ? 2 : 1)) continue;
    seen[name] |= raises ? 2 : 1;
    const std::string vars = WriteJson(dir, "vars.json", c["variables"]);
    std::string err;
    const auto r = RunPagodaWithStderr("render-template --now 2026-07-26T12:00:00 --template " +
                                           Quote(TemplatePath(name)) + " --vars " + Quote(vars),
                                       &err);
    if (raises) {
      EXPECT_EQ(r.exit_code, 1) << id;
      EXPECT_NE(err.find(c["expected_error"].get<std::string>()), std::string::npos)
          << id << ": " << err;
    } else {
      EXPECT_EQ(r.exit_code, 0) << id << ": " << err;
      EXPECT_EQ(r.out, c["expected"].get<std::string>()) << id;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 19 + 7);  // every template renders; 7 of them also raise
}

TEST(CliRenderTemplate, JsonHasTextAndSegments) {
  TempDir dir;
  const Json vars = {{"messages", Json::array({{{"role", "user"}, {"content", "hi <|im_end|>"}}})},
                     {"add_generation_prompt", true}};
  const auto r =
      RunPagoda("render-template --json --template " + Quote(TemplatePath("qwen2-instruct")) +
                " --vars " + Quote(WriteJson(dir, "v.json", vars)));
  ASSERT_EQ(r.exit_code, 0);
  const auto j = Json::parse(r.out);
  const std::string text = j["text"];
  EXPECT_NE(text.find("<|im_start|>user\nhi <|im_end|><|im_end|>\n<|im_start|>assistant\n"),
            std::string::npos);
  EXPECT_FALSE(j.contains("token_ids"));
  std::string joined;
  bool user_text_is_content = false;
  for (const auto& s : j["segments"]) {
    EXPECT_EQ(s["offset"].get<size_t>(), joined.size());
    joined += s["text"].get<std::string>();
    if (s["kind"] == "content" && s["text"] == "hi <|im_end|>") user_text_is_content = true;
    EXPECT_TRUE(s["kind"] == "content" || s["kind"] == "template");
  }
  EXPECT_EQ(joined, text);
  EXPECT_TRUE(user_text_is_content);
}

TEST(CliRenderTemplate, NowFixesTheClock) {
  TempDir dir;
  const Json vars = {{"messages", Json::array({{{"role", "user"}, {"content", "x"}}})}};
  const std::string flags = "render-template --template " +
                            Quote(TemplatePath("llama-3.2-3b-instruct")) + " --vars " +
                            Quote(WriteJson(dir, "v.json", vars));
  const auto r = RunPagoda(flags + " --now 2031-02-03T04:05:06");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Today Date: 03 Feb 2031\n"), std::string::npos) << r.out;
  EXPECT_EQ(RunPagoda(flags + " --now tomorrow").exit_code, 2);
}

// A model's own template (tokenizer_config.json of an HF directory): its special tokens are
// the defaults, and --json adds the token ids as the server makes them.
TEST(CliRenderTemplate, ModelTemplateAndTokenIds) {
  TempDir dir;
  const std::string model = dir.File("hf");
  ASSERT_EQ(
      RunPagoda("make-model -q --layers 1 --context 64 --format safetensors -o " + Quote(model))
          .exit_code,
      0);
  Json tc = Json::parse(std::ifstream(model + "/tokenizer_config.json"));
  tc["chat_template"] =
      "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}{{ eos_token }}"
      "{% endfor %}";
  std::ofstream(model + "/tokenizer_config.json") << tc.dump();
  const Json vars = {{"messages", Json::array({{{"role", "user"}, {"content", "Once upon"}}})}};
  const std::string v = WriteJson(dir, "v.json", vars);
  auto r = RunPagoda("render-template --model " + Quote(model) + " --vars " + Quote(v));
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "<s>user: Once upon</s>");
  r = RunPagoda("render-template --json --model " + Quote(model) + " --vars " + Quote(v));
  ASSERT_EQ(r.exit_code, 0);
  const auto j = Json::parse(r.out);
  ASSERT_TRUE(j.contains("token_ids"));
  // As the server tokenizes a chat: the template's "<s>" / "</s>" are the BOS / EOS tokens
  // (a SentencePiece tokenizer would not produce them from the text), and no second BOS.
  const auto tok = RunPagoda("tokenize --json --no-bos --parse-special --model " +
                             Quote(model + "/tokenizer.model") + " --text " +
                             Quote(j["text"].get<std::string>()));
  ASSERT_EQ(tok.exit_code, 0);
  EXPECT_EQ(j["token_ids"], Json::parse(tok.out)["token_ids"]);
  EXPECT_EQ(j["token_ids"].front(), 1);
  EXPECT_EQ(j["token_ids"].back(), 2);
}

TEST(CliRenderTemplate, BadArgumentsAndTemplates) {
  TempDir dir;
  const std::string v = WriteJson(dir, "v.json", Json::object());
  const std::string t = dir.File("t.jinja");
  std::ofstream(t) << "{% for x in y %}";
  std::string err;
  auto r =
      RunPagodaWithStderr("render-template --template " + Quote(t) + " --vars " + Quote(v), &err);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(err.find("syntax error, line 1"), std::string::npos) << err;
  EXPECT_NE(RunPagoda("render-template --vars " + Quote(v)).exit_code, 0);
  EXPECT_NE(RunPagoda("render-template --template " + Quote(t)).exit_code, 0);
  EXPECT_NE(RunPagoda("render-template --template " + Quote(t) + " --model x --vars " + Quote(v))
                .exit_code,
            0);
  std::ofstream(dir.File("bad.json")) << "{not json";
  EXPECT_EQ(
      RunPagoda("render-template --template " + Quote(t) + " --vars " + Quote(dir.File("bad.json")))
          .exit_code,
      2);
  EXPECT_EQ(RunPagoda("render-template --model " +
                      Quote(SharedPath("models/aidreams260K/"
                                       "aidreams260K-f32.gguf")) +
                      " --vars " + Quote(v))
                .exit_code,
            2);  // that model has no chat template
  const auto help = RunPagoda("render-template --help");
  for (const char* option : {"--model", "--template", "--vars", "--now", "--json"}) {
    EXPECT_NE(help.out.find(option), std::string::npos) << option;
  }
}

}  // namespace
}  // namespace pagoda
