#include "scheduler/stop_checker.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace pagoda {
namespace {

struct StreamRun {
  std::vector<std::string> pieces;  // what each Push / Flush returned
  std::string text;                 // their concatenation
  int32_t stop_index = -1;
};

// Pushes every delta (stopping at a match, like the engine) and flushes if no match.
StreamRun Feed(StopChecker& checker, const std::vector<std::string>& deltas) {
  StreamRun run;
  for (const std::string& delta : deltas) {
    StopCheckResult r = checker.Push(delta);
    run.pieces.push_back(r.text);
    run.text += r.text;
    if (r.stopped()) {
      run.stop_index = r.stop_index;
      return run;
    }
  }
  StopCheckResult r = checker.Flush();
  run.pieces.push_back(r.text);
  run.text += r.text;
  run.stop_index = r.stop_index;
  return run;
}

StreamRun Feed(std::vector<std::string> stop, const std::vector<std::string>& deltas,
               bool include = false) {
  StopChecker checker(std::move(stop), include);
  return Feed(checker, deltas);
}

TEST(StopCheckerTest, NoStopStringsPassesEverythingThrough) {
  StopChecker checker({});
  EXPECT_EQ(checker.Push("Hello").text, "Hello");
  EXPECT_EQ(checker.Push(", world").text, ", world");
  EXPECT_EQ(checker.Flush().text, "");
  EXPECT_FALSE(checker.stopped());
}

TEST(StopCheckerTest, StopInsideOneDelta) {
  StopChecker checker({"END"});
  EXPECT_EQ(checker.Push("abc").text, "abc");
  const StopCheckResult r = checker.Push("xxENDyy");
  EXPECT_EQ(r.text, "xx");
  EXPECT_EQ(r.stop_index, 0);
  EXPECT_TRUE(checker.stopped());
  EXPECT_EQ(checker.Push("more").text, "");
  EXPECT_EQ(checker.Flush().text, "");
}

TEST(StopCheckerTest, StopAcrossTwoAndThreeDeltas) {
  StopChecker two({"STOP"});
  EXPECT_EQ(two.Push("hi ST").text, "hi ");  // "ST" held back
  const StopCheckResult r = two.Push("OP!");
  EXPECT_EQ(r.text, "");
  EXPECT_TRUE(r.stopped());

  StopChecker three({"STOP"});
  EXPECT_EQ(three.Push("aS").text, "a");
  EXPECT_EQ(three.Push("T").text, "");
  EXPECT_EQ(three.Push("O").text, "");
  const StopCheckResult r3 = three.Push("Pz");
  EXPECT_EQ(r3.text, "");
  EXPECT_EQ(r3.stop_index, 0);
}

TEST(StopCheckerTest, StopAtTheVeryStart) {
  StreamRun run = Feed({"<end>"}, {"<end>", "after"});
  EXPECT_EQ(run.text, "");
  EXPECT_EQ(run.stop_index, 0);
  run = Feed({"<end>"}, {"<e", "nd>tail"}, /*include=*/true);
  EXPECT_EQ(run.text, "<end>");
  EXPECT_EQ(run.stop_index, 0);
}

TEST(StopCheckerTest, EarliestMatchWins) {
  StreamRun run = Feed({"world", "lo"}, {"hello world"});
  EXPECT_EQ(run.text, "hel");
  EXPECT_EQ(run.stop_index, 1);
  // Equal starts: the shortest wins (it completes first).
  run = Feed({"abc", "ab"}, {"xabcd"}, true);
  EXPECT_EQ(run.text, "xab");
  EXPECT_EQ(run.stop_index, 1);
  // "bc" completes first, but "abcd" starts earlier and is still possible: wait for it.
  StopChecker checker({"bc", "abcd"});
  StopCheckResult r = checker.Push("xabc");
  EXPECT_EQ(r.text, "x");
  EXPECT_FALSE(r.stopped());
  r = checker.Push("d");
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.stop_index, 1);
  // ... and if it does not complete, the later-starting "bc" is reported.
  run = Feed({"bc", "abcd"}, {"xabc", "e"});
  EXPECT_EQ(run.text, "xa");
  EXPECT_EQ(run.stop_index, 0);
}

TEST(StopCheckerTest, DeferredMatchIsReportedByFlush) {
  StopChecker checker({"bc", "abcd"});
  EXPECT_EQ(checker.Push("xabc").text, "x");
  const StopCheckResult r = checker.Flush();
  EXPECT_EQ(r.text, "a");
  EXPECT_EQ(r.stop_index, 0);
}

TEST(StopCheckerTest, FalsePrefixIsHeldThenReleased) {
  StopChecker checker({"###"});
  EXPECT_EQ(checker.Push("a#").text, "a");
  EXPECT_EQ(checker.Push("#").text, "");
  EXPECT_EQ(checker.Push("b").text, "##b");
  EXPECT_EQ(checker.Push("c#").text, "c");
  EXPECT_EQ(checker.Flush().text, "#");
  EXPECT_FALSE(checker.stopped());
}

TEST(StopCheckerTest, OverlappingPrefixKeepsTheLongestCandidate) {
  // "aab" inside "aaab": after "aa" the holdback must keep both a's.
  StreamRun run = Feed({"aab"}, {"a", "a", "a", "b", "c"});
  EXPECT_EQ(run.text, "a");
  EXPECT_EQ(run.stop_index, 0);
}

TEST(StopCheckerTest, IncludeStopStringInOutput) {
  StreamRun run = Feed({"\n\n"}, {"line one\n", "\nline two"}, true);
  EXPECT_EQ(run.text, "line one\n\n");
  EXPECT_EQ(run.stop_index, 0);
}

TEST(StopCheckerTest, MultiByteUtf8AroundTheStop) {
  // "é" = C3 A9, "€" = E2 82 AC, "😀" = F0 9F 98 80.
  StreamRun run = Feed({"€€"}, {"café", " €", "€ 😀"});
  EXPECT_EQ(run.text, "café ");
  EXPECT_EQ(run.stop_index, 0);
  StopChecker checker({"😀!"});
  EXPECT_EQ(checker.Push("é😀").text, "é");
  EXPECT_EQ(checker.Push("😀").text, "😀");  // first 😀 released, second held
  EXPECT_EQ(checker.Flush().text, "😀");
  // A stop sharing a lead byte with the text is never matched inside a character.
  run = Feed({"\x82\xAC"}, {"€x"});
  EXPECT_EQ(run.text, "€x");
  EXPECT_EQ(run.stop_index, -1);
}

TEST(StopCheckerTest, EmptyStopStringsAreIgnored) {
  StreamRun run = Feed({"", "z"}, {"abc", "z"});
  EXPECT_EQ(run.text, "abc");
  EXPECT_EQ(run.stop_index, 1);
}

TEST(StopCheckerTest, ValidateStopStrings) {
  EXPECT_TRUE(ValidateStopStrings({}).ok());
  EXPECT_TRUE(ValidateStopStrings({"a", "é€😀"}).ok());
  Status st = ValidateStopStrings({"a", ""});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("stop[1]"), std::string::npos) << st.message();
  st = ValidateStopStrings({"\xC3"});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("stop[0]"), std::string::npos) << st.message();
  EXPECT_FALSE(ValidateStopStrings({"\x80"}).ok());
}

// Naive reference: earliest start over the full text; shortest, then lowest index on ties.
StreamRun Reference(const std::vector<std::string>& stop, const std::string& text, bool include) {
  size_t best_pos = std::string::npos;
  int32_t best = -1;
  for (size_t i = 0; i < stop.size(); ++i) {
    const size_t pos = text.find(stop[i]);
    if (pos == std::string::npos) continue;
    if (best < 0 || pos < best_pos || (pos == best_pos && stop[i].size() < stop[best].size())) {
      best_pos = pos;
      best = static_cast<int32_t>(i);
    }
  }
  StreamRun run;
  run.stop_index = best;
  run.text = best < 0 ? text : text.substr(0, best_pos) + (include ? stop[best] : "");
  return run;
}

bool IsUtf8Boundary(const std::string& s, size_t pos) {
  return pos >= s.size() || (static_cast<unsigned char>(s[pos]) & 0xC0) != 0x80;
}

// Random text as whole characters: random letters mixed with stop-string prefixes.
std::vector<std::string> RandomChars(std::mt19937& gen, const std::vector<std::string>& alphabet,
                                     const std::vector<std::vector<std::string>>& stop_chars) {
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(gen); };
  std::vector<std::string> chars;
  const size_t pieces = pick(10);
  for (size_t p = 0; p < pieces; ++p) {
    if (pick(2) == 0) {
      chars.push_back(alphabet[pick(alphabet.size())]);
      continue;
    }
    const std::vector<std::string>& s = stop_chars[pick(stop_chars.size())];
    const size_t len = 1 + pick(s.size());  // a prefix, often the whole stop string
    chars.insert(chars.end(), s.begin(), s.begin() + len);
  }
  return chars;
}

// Deltas of 0..4 whole characters (valid UTF-8 each, as from the detokenizer).
std::vector<std::string> RandomDeltas(std::mt19937& gen, const std::vector<std::string>& chars) {
  std::vector<std::string> deltas;
  for (size_t i = 0; i < chars.size();) {
    const size_t take = std::min<size_t>(gen() % 5, chars.size() - i);
    std::string d;
    for (size_t j = 0; j < take; ++j) d += chars[i + j];
    i += take;
    deltas.push_back(d);
  }
  return deltas;
}

// Stop strings over `alphabet`; some are substrings of others (the tricky overlaps).
std::vector<std::vector<std::string>> RandomStops(std::mt19937& gen,
                                                  const std::vector<std::string>& alphabet) {
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(gen); };
  std::vector<std::vector<std::string>> stops;
  const size_t count = 1 + pick(3);
  for (size_t i = 0; i < count; ++i) {
    if (!stops.empty() && pick(2) == 0) {
      const std::vector<std::string>& base = stops[pick(stops.size())];
      const size_t begin = pick(base.size());
      const size_t len = 1 + pick(base.size() - begin);
      stops.emplace_back(base.begin() + begin, base.begin() + begin + len);
      continue;
    }
    std::vector<std::string> s(1 + pick(4));
    for (std::string& c : s) c = alphabet[pick(alphabet.size())];
    stops.push_back(s);
  }
  return stops;
}

TEST(StopCheckerTest, RandomizedMatchesNaiveFind) {
  const std::vector<std::string> all = {"a", "b", "é", "€", "😀", " "};
  std::mt19937 gen(2024);
  int stopped = 0;
  for (int iter = 0; iter < 5000; ++iter) {
    const std::vector<std::string> alphabet(all.begin(), all.begin() + 2 + iter % 5);
    const std::vector<std::vector<std::string>> stop_chars = RandomStops(gen, alphabet);
    std::vector<std::string> stop;
    for (const auto& s : stop_chars)
      stop.push_back(std::accumulate(s.begin(), s.end(), std::string()));
    const std::vector<std::string> deltas =
        RandomDeltas(gen, RandomChars(gen, alphabet, stop_chars));
    const std::string full = std::accumulate(deltas.begin(), deltas.end(), std::string());
    const bool include = gen() % 2 == 1;
    StopChecker checker(stop, include);
    const StreamRun run = Feed(checker, deltas);
    const StreamRun expected = Reference(stop, full, include);
    ASSERT_EQ(run.text, expected.text) << "iter " << iter << " full '" << full << "'";
    ASSERT_EQ(run.stop_index, expected.stop_index) << "iter " << iter;
    stopped += run.stop_index >= 0;
    size_t offset = 0;
    for (const std::string& piece : run.pieces) {
      ASSERT_TRUE(IsUtf8Boundary(run.text, offset)) << "iter " << iter;
      offset += piece.size();
    }
  }
  EXPECT_GT(stopped, 2000);  // most runs exercise a match
}

}  // namespace
}  // namespace pagoda
