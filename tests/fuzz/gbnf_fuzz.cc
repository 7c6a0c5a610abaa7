// Fuzz target: the GBNF parser with tight limits and, for a grammar that parses, the matcher and
// the token masks: a few byte strings fed whole and byte by byte, then a short walk that always
// takes the first allowed token of a small vocabulary. Besides crashes, it traps when the
// masker disagrees with trying every token on a copy of the matcher, when a refused Accept
// changes the state, or when equal states hash differently.
#include <string>
#include <vector>

#include "scheduler/grammar/token_mask.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using pagoda::grammar::GrammarMatcher;
using pagoda::grammar::TokenMask;
using pagoda::grammar::TokenTrie;

const std::vector<std::string>& Vocab() {
  static const auto* vocab = new std::vector<std::string>{"",
                                                          "a",
                                                          "b",
                                                          "ab",
                                                          "abc",
                                                          "0",
                                                          "12",
                                                          " ",
                                                          "\n",
                                                          "\"",
                                                          "{",
                                                          "}",
                                                          "[",
                                                          "]",
                                                          ":",
                                                          ",",
                                                          "\\",
                                                          "true",
                                                          "null",
                                                          "\":",
                                                          "{\"",
                                                          "x",
                                                          "\xC3",
                                                          "\xA9",
                                                          "\xC3\xA9",
                                                          "\xE4\xB8\xAD",
                                                          "\xF0\x9F\x98\x80",
                                                          "\xFF",
                                                          "-",
                                                          ".",
                                                          "ba"};
  return *vocab;
}

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// The mask must equal the reference: each token tried on a copy.
void CheckMask(const GrammarMatcher& m, const TokenMask& mask) {
  const auto& vocab = Vocab();
  for (size_t i = 0; i < vocab.size(); ++i) {
    const bool end = i == 0;  // id 0 doubles as EOS
    const bool want = end ? m.IsAccepting() : m.CanAccept(vocab[i]);
    Check(mask.Allowed(static_cast<int32_t>(i)) == want);
  }
}

void Feed(const GrammarMatcher& start, std::string_view bytes) {
  GrammarMatcher whole = start, bytewise = start;
  const bool can = start.CanAccept(bytes);
  const bool did = whole.Accept(bytes);
  Check(can == did);
  if (!did) Check(whole.SameState(start) && whole.StateHash() == start.StateHash());
  bool all = true;
  for (char c : bytes) all = all && bytewise.Accept(std::string_view(&c, 1));
  if (did && all) Check(whole.SameState(bytewise) && whole.StateHash() == bytewise.StateHash());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagoda::grammar;
  GrammarLimits limits;
  limits.max_text_bytes = 4096;
  limits.max_elements = 20000;
  limits.max_nesting = 32;
  limits.max_repetition = 64;
  limits.max_stacks = 256;
  limits.max_advance_steps = 20000;
  limits.max_state_entries = 1 << 16;
  const std::string_view text = pagoda::fuzz::AsText(data, size);
  auto grammar = ParseGbnf(text, limits);
  if (!grammar.ok()) return 0;
  const GrammarMatcher start(*grammar);
  for (std::string_view s : {std::string_view("a"), std::string_view("{\"a\": [1, true]}"),
                             std::string_view("\xC3\xA9\xE4\xB8\xAD"), text.substr(0, 16)}) {
    Feed(start, s);
  }
  static const auto* trie = new TokenTrie(Vocab(), std::vector<int32_t>{0});
  TokenMasker masker;
  TokenMask mask;
  GrammarMatcher m = start;
  for (int step = 0; step < 24; ++step) {
    masker.Compute(m, *trie, &mask);
    CheckMask(m, mask);
    int32_t next = -1;
    for (int32_t id = 1; id < trie->vocab_size() && next < 0; ++id) {
      if (mask.Allowed((id + step) % trie->vocab_size()) && (id + step) % trie->vocab_size() != 0) {
        next = (id + step) % trie->vocab_size();
      }
    }
    if (next < 0) break;
    Check(m.Accept(Vocab()[static_cast<size_t>(next)]));
  }
  return 0;
}
