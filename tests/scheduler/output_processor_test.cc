// OutputProcessor tests without a scheduler or backend: the engine core is replaced by hooks
// that record what the processor asks of it, and each step by a logits row whose argmax is the
// token we want the (greedy) sampler to draw.
#include "scheduler/output_processor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/grammar/grammar.h"
#include "tests/scheduler/fake_backend.h"

namespace pagoda {
namespace {

using testing::ByteToken;
using testing::kFakeVocab;

constexpr int32_t kEos = 2;

Request Greedy(const std::string& id, int32_t max_tokens, int32_t n = 1) {
  Request r;
  r.request_id = id;
  r.prompt_token_ids = {ByteToken('P'), ByteToken('Q'), ByteToken('R'), ByteToken('S')};
  r.sampling.temperature = 0.0f;
  r.sampling.n = n;
  r.stopping.max_tokens = max_tokens;
  return r;
}

std::string Text(const std::vector<RequestOutput>& outs) {
  std::string text;
  for (const RequestOutput& o : outs) text += o.text;
  return text;
}

std::vector<int32_t> Tokens(const std::vector<RequestOutput>& outs) {
  std::vector<int32_t> tokens;
  for (const RequestOutput& o : outs)
    tokens.insert(tokens.end(), o.token_ids.begin(), o.token_ids.end());
  return tokens;
}

class OutputProcessorTest : public ::testing::Test {
 protected:
  OutputProcessorTest() { Make(/*max_model_len=*/1000); }

  void Make(int32_t max_model_len) {
    CoreHooks hooks;
    hooks.start_fork = [this](const Sequence& parent, Sequence& child) -> Status {
      forks_.emplace_back(parent.seq_id, child.seq_id);
      if (fail_forks_) return ResourceExhausted("no blocks");
      seqs_[child.seq_id] = &child;
      return Status::Ok();
    };
    hooks.release_sequence = [this](Sequence& seq) { released_.push_back(seq.seq_id); };
    hooks.request_finished = [this](const std::string& id) { finished_ids_.push_back(id); };
    processor_ = std::make_unique<OutputProcessor>(
        *tokenizer_, OutputLimits{{kEos}, max_model_len, {}}, std::move(hooks));
  }

  std::shared_ptr<RequestStream> Add(Request r) {
    auto stream = std::make_shared<RequestStream>();
    Sequence& seq = processor_->AddRequest({std::move(r), stream, EngineClock::now()});
    seqs_[seq.seq_id] = &seq;
    return stream;
  }
  // Sequence `seq_id` completed its step; its logits make `token` the greedy choice.
  void Feed(int64_t seq_id, int32_t token) {
    std::vector<float> row(kFakeVocab, 0.0f);
    row[token] = 10.0f;
    row[(token + 1) % kFakeVocab] = 9.0f;
    processor_->ProcessLogits(seq_id, row);
  }
  // A row that ranks `order` first to last (the rest below): a greedy constrained sample takes
  // the first token of `order` its grammar allows.
  void FeedRanked(int64_t seq_id, const std::vector<int32_t>& order) {
    std::vector<float> row(kFakeVocab, 0.0f);
    for (size_t i = 0; i < order.size(); ++i) row[order[i]] = 20.0f - static_cast<float>(i);
    processor_->ProcessLogits(seq_id, row);
  }
  void FeedText(int64_t seq_id, const std::string& text) {
    for (char c : text) Feed(seq_id, ByteToken(c));
  }
  // Every message queued on `stream` so far.
  static std::vector<RequestOutput> Messages(RequestStream& stream) {
    std::vector<RequestOutput> outs;
    RequestOutput out;
    while (stream.Pop(&out, EngineClock::now())) outs.push_back(std::move(out));
    return outs;
  }

  std::unique_ptr<Tokenizer> tokenizer_ = testing::MakeByteTokenizer();
  std::unique_ptr<OutputProcessor> processor_;
  std::map<int64_t, Sequence*> seqs_;
  std::vector<std::pair<int64_t, int64_t>> forks_;  // (parent, child)
  std::vector<int64_t> released_;
  std::vector<std::string> finished_ids_;
  bool fail_forks_ = false;
};

TEST_F(OutputProcessorTest, StopStringAcrossTokensIsHeldBackThenCut) {
  Request r = Greedy("r", 10);
  r.stopping.stop = {"cd"};
  auto stream = Add(r);
  FeedText(0, "abc");
  EXPECT_EQ(Text(Messages(*stream)), "ab");  // "c" may start "cd": held back
  EXPECT_TRUE(released_.empty());
  FeedText(0, "d");
  const std::vector<RequestOutput> last = Messages(*stream);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].text, "");
  EXPECT_EQ(last[0].token_ids, std::vector<int32_t>{ByteToken('d')});
  EXPECT_EQ(last[0].finish_reason, FinishReason::kStop);
  EXPECT_TRUE(last[0].request_finished);
  EXPECT_EQ(last[0].usage.completion_tokens, 4);
  EXPECT_EQ(released_, std::vector<int64_t>{0});
  EXPECT_EQ(finished_ids_, std::vector<std::string>{"r"});
  EXPECT_EQ(processor_->num_live_requests(), 0);
}

TEST_F(OutputProcessorTest, StopStringKeptWithIncludeStopStr) {
  Request r = Greedy("r", 10);
  r.stopping.stop = {"cd"};
  r.stopping.include_stop_str_in_output = true;
  auto stream = Add(r);
  FeedText(0, "abcd");
  const std::vector<RequestOutput> outs = Messages(*stream);
  EXPECT_EQ(Text(outs), "abcd");
  EXPECT_EQ(outs.back().finish_reason, FinishReason::kStop);
}

TEST_F(OutputProcessorTest, HeldBackTextIsReleasedWhenTheSampleEndsByLength) {
  Request r = Greedy("r", 2);
  r.stopping.stop = {"xy"};
  auto stream = Add(r);
  FeedText(0, "ax");
  const std::vector<RequestOutput> outs = Messages(*stream);
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].text, "a");
  EXPECT_EQ(outs[1].text, "x");
  EXPECT_EQ(outs[1].finish_reason, FinishReason::kLength);
}

TEST_F(OutputProcessorTest, Utf8CharacterSplitAcrossTokensIsEmittedWhole) {
  auto stream = Add(Greedy("r", 3));
  Feed(0, ByteToken('\xC3'));
  Feed(0, ByteToken('\xA9'));
  const std::vector<RequestOutput> outs = Messages(*stream);
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].text, "");
  EXPECT_EQ(outs[1].text, "\xC3\xA9");
}

TEST_F(OutputProcessorTest, EosAndStopTokenIdsEndTheSampleWithoutBeingOutput) {
  auto eos_stream = Add(Greedy("eos", 10));
  Request r = Greedy("stopid", 10);
  r.stopping.stop_token_ids = {ByteToken('z')};
  auto stopid_stream = Add(r);
  FeedText(0, "a");
  EXPECT_EQ(seqs_[0]->num_output_tokens(), 1);
  Feed(0, kEos);
  FeedText(1, "bz");
  const std::vector<RequestOutput> eos = Messages(*eos_stream);
  EXPECT_EQ(Tokens(eos), std::vector<int32_t>{ByteToken('a')});
  EXPECT_EQ(eos.back().finish_reason, FinishReason::kStop);
  EXPECT_EQ(eos.back().usage.completion_tokens, 1);
  const std::vector<RequestOutput> stopid = Messages(*stopid_stream);
  EXPECT_EQ(Text(stopid), "b");
  EXPECT_EQ(stopid.back().finish_reason, FinishReason::kStop);
  EXPECT_EQ(processor_->num_generation_tokens(), 2);
}

TEST_F(OutputProcessorTest, IgnoreEosKeepsTheEndTokenAndRunsToMaxTokens) {
  Request r = Greedy("r", 2);
  r.stopping.ignore_eos = true;
  auto stream = Add(r);
  Feed(0, kEos);
  EXPECT_TRUE(released_.empty());
  FeedText(0, "a");
  const std::vector<RequestOutput> outs = Messages(*stream);
  EXPECT_EQ(Tokens(outs), (std::vector<int32_t>{kEos, ByteToken('a')}));
  EXPECT_EQ(outs.back().finish_reason, FinishReason::kLength);
}

TEST_F(OutputProcessorTest, MaxModelLenEndsTheSampleWithLength) {
  Make(/*max_model_len=*/6);  // the 4-token prompt leaves room for 2
  auto stream = Add(Greedy("r", 100));
  FeedText(0, "ab");
  const std::vector<RequestOutput> outs = Messages(*stream);
  EXPECT_EQ(Text(outs), "ab");
  EXPECT_EQ(outs.back().finish_reason, FinishReason::kLength);
  EXPECT_EQ(released_, std::vector<int64_t>{0});
}

TEST_F(OutputProcessorTest, LogprobsOnlyWhenAsked) {
  Request r = Greedy("lp", 5);
  r.sampling.top_logprobs = 2;
  auto with = Add(r);
  auto without = Add(Greedy("plain", 5));
  FeedText(0, "a");
  FeedText(1, "a");
  const std::vector<RequestOutput> outs = Messages(*with);
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_EQ(outs[0].logprobs.size(), 1u);
  const TokenLogprob& lp = outs[0].logprobs[0];
  EXPECT_EQ(lp.token_id, ByteToken('a'));
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].first, ByteToken('a'));
  EXPECT_EQ(lp.top[1].first, ByteToken('b'));
  EXPECT_FLOAT_EQ(lp.logprob, lp.top[0].second);
  EXPECT_LT(lp.logprob, 0.0f);
  EXPECT_TRUE(Messages(*without)[0].logprobs.empty());
}

TEST_F(OutputProcessorTest, NSamplesForkAfterThePromptAndDrawFromTheSameRow) {
  auto stream = Add(Greedy("n", 2, /*n=*/3));
  EXPECT_TRUE(forks_.empty());
  FeedText(0, "a");
  EXPECT_EQ(forks_, (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {0, 2}}));
  ASSERT_EQ(seqs_.size(), 3u);
  EXPECT_EQ(seqs_[2]->sample_index, 2);
  EXPECT_EQ(seqs_[2]->num_output_tokens(), 1);
  std::vector<RequestOutput> outs = Messages(*stream);
  ASSERT_EQ(outs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(outs[i].index, (static_cast<int32_t>(i) + 1) % 3);  // the forks first
    EXPECT_EQ(outs[i].token_ids, std::vector<int32_t>{ByteToken('a')});
  }
  FeedText(1, "b");
  FeedText(2, "c");
  EXPECT_TRUE(finished_ids_.empty());
  FeedText(0, "d");
  outs = Messages(*stream);
  ASSERT_EQ(outs.size(), 3u);
  for (const RequestOutput& o : outs) EXPECT_EQ(o.finish_reason, FinishReason::kLength);
  EXPECT_FALSE(outs[1].request_finished);
  EXPECT_TRUE(outs[2].request_finished);
  EXPECT_EQ(outs[2].usage.completion_tokens, 6);
  EXPECT_EQ(released_, (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(finished_ids_, std::vector<std::string>{"n"});
}

TEST_F(OutputProcessorTest, ForkThatCannotStartEndsWithAnErrorAndOthersGoOn) {
  fail_forks_ = true;
  auto stream = Add(Greedy("n", 2, /*n=*/2));
  FeedText(0, "a");
  std::vector<RequestOutput> outs = Messages(*stream);
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].index, 1);
  EXPECT_EQ(outs[0].finish_reason, FinishReason::kError);
  EXPECT_EQ(outs[0].error, "fork failed: KV cache exhausted");
  EXPECT_TRUE(outs[0].token_ids.empty());
  EXPECT_FALSE(outs[0].request_finished);
  EXPECT_EQ(outs[1].index, 0);
  EXPECT_EQ(released_, std::vector<int64_t>{1});
  FeedText(0, "b");
  outs = Messages(*stream);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_TRUE(outs[0].request_finished);
  EXPECT_EQ(outs[0].usage.completion_tokens, 2);
}

TEST_F(OutputProcessorTest, AbortBeforeTheForkEndsEverySampleAtOnce) {
  auto stream = Add(Greedy("n", 5, /*n=*/4));
  processor_->Abort("unknown");
  EXPECT_TRUE(released_.empty());
  processor_->Abort("n");
  const std::vector<RequestOutput> outs = Messages(*stream);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(outs[0].request_finished);
  EXPECT_TRUE(forks_.empty());
  EXPECT_EQ(released_, std::vector<int64_t>{0});
  EXPECT_EQ(processor_->num_live_requests(), 0);
}

TEST_F(OutputProcessorTest, FailScheduledFailsTheScheduledRequestsOnly) {
  auto forked = Add(Greedy("forked", 5, /*n=*/2));
  auto other = Add(Greedy("other", 5));
  FeedText(0, "a");  // forks seq 2 (seq 1 is "other")
  ASSERT_EQ(forks_, (std::vector<std::pair<int64_t, int64_t>>{{0, 2}}));
  Messages(*forked);
  SchedulerOutput out;
  out.scheduled.push_back({seqs_[2], 1, true});
  processor_->FailScheduled(out, "INTERNAL: device lost");
  const std::vector<RequestOutput> outs = Messages(*forked);
  ASSERT_EQ(outs.size(), 2u);
  for (const RequestOutput& o : outs) {
    EXPECT_EQ(o.finish_reason, FinishReason::kError);
    EXPECT_EQ(o.error, "INTERNAL: device lost");
  }
  EXPECT_TRUE(outs.back().request_finished);
  EXPECT_TRUE(Messages(*other).empty());
  EXPECT_EQ(processor_->num_live_requests(), 1);
}

TEST_F(OutputProcessorTest, TimesUsageAndTheFinishObserver) {
  std::vector<RequestOutput> observed;
  processor_->SetFinishObserver([&](const RequestOutput& o) { observed.push_back(o); });
  auto stream = Add(Greedy("n", 2, /*n=*/2));
  seqs_[0]->num_cached_tokens_at_admission = 4;
  const EngineClock::time_point t0 = EngineClock::now();
  SchedulerOutput out;
  out.scheduled.push_back({seqs_[0], 4, false});
  processor_->RecordSchedule(out, t0);
  processor_->RecordSchedule(out, t0 + std::chrono::seconds(1));  // not the first any more
  FeedText(0, "a");
  out.scheduled = {{seqs_[0], 1, true}, {seqs_[1], 1, true}};
  out.preempted = {seqs_[0], seqs_[1]};  // only sample 0's preemptions count
  processor_->RecordSchedule(out, t0 + std::chrono::seconds(2));
  FeedText(0, "b");
  EXPECT_TRUE(observed.empty());
  FeedText(1, "c");
  ASSERT_EQ(observed.size(), 1u);
  EXPECT_TRUE(observed[0].request_finished);
  const RequestOutput last = Messages(*stream).back();
  EXPECT_EQ(last.times.first_scheduled, t0);
  EXPECT_EQ(last.times.num_preemptions, 1);
  EXPECT_EQ(last.times.token_times.size(), 2u);  // sample 0's tokens
  EXPECT_LE(last.times.first_token, last.times.finished);
  EXPECT_EQ(last.usage.prompt_tokens, 4);
  EXPECT_EQ(last.usage.cached_prompt_tokens, 4);
  EXPECT_EQ(last.usage.completion_tokens, 4);
  EXPECT_EQ(observed[0].usage.completion_tokens, 4);
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

std::shared_ptr<const grammar::Grammar> Gbnf(const char* text) {
  auto g = grammar::ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

std::vector<int32_t> Bytes(const std::string& text) {
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(ByteToken(c));
  return ids;
}

TEST_F(OutputProcessorTest, GrammarMasksTokensAndEndsTheSampleWhereItIsComplete) {
  Request r = Greedy("g", 10);
  r.grammar = Gbnf(R"(root ::= "yes" | "no")");
  auto stream = Add(r);
  // The model prefers EOS, then 'x', 'n', 'y', 'o', 'e', 's': the grammar allows n, then o.
  const std::vector<int32_t> order = {kEos,           ByteToken('x'), ByteToken('n'),
                                      ByteToken('y'), ByteToken('o'), ByteToken('e'),
                                      ByteToken('s')};
  FeedRanked(0, order);
  FeedRanked(0, order);
  const std::vector<RequestOutput> outs = Messages(*stream);
  EXPECT_EQ(Text(outs), "no");
  // Complete after "no": the sample ends without an EOS step.
  EXPECT_EQ(outs.back().finish_reason, FinishReason::kStop);
  EXPECT_EQ(outs.back().usage.completion_tokens, 2);
  EXPECT_EQ(processor_->structured_output_stats().num_masks, 2);
}

TEST_F(OutputProcessorTest, GrammarAllowsEosOnlyWhereItAccepts) {
  Request r = Greedy("g", 10);
  r.grammar = Gbnf("root ::= [a-z]+");
  auto stream = Add(r);
  const std::vector<int32_t> order = {kEos, ByteToken('1'), ByteToken('q')};
  FeedRanked(0, order);  // EOS is masked: "q"
  FeedRanked(0, order);  // [a-z]+ accepts "q": EOS wins
  const std::vector<RequestOutput> outs = Messages(*stream);
  EXPECT_EQ(Text(outs), "q");
  EXPECT_EQ(outs.back().finish_reason, FinishReason::kStop);
}

TEST_F(OutputProcessorTest, GrammarStopTokenIdsOnlyWhereItAcceptsAndMaxTokensGivesLength) {
  Request r = Greedy("g", 3);
  r.grammar = Gbnf("root ::= [a-z]+");
  r.stopping.ignore_eos = true;
  r.stopping.stop_token_ids = {ByteToken('!')};
  auto stream = Add(r);
  FeedRanked(0, {ByteToken('!'), kEos, ByteToken('a')});  // neither '!' nor EOS may start
  FeedRanked(0, {kEos, ByteToken('b')});                  // ignore_eos: EOS never allowed
  FeedRanked(0, {kEos, ByteToken('c')});
  std::vector<RequestOutput> outs = Messages(*stream);
  EXPECT_EQ(Text(outs), "abc");
  EXPECT_EQ(outs.back().finish_reason, FinishReason::kLength);
  Request r2 = Greedy("g2", 3);
  r2.grammar = r.grammar;
  r2.stopping.stop_token_ids = {ByteToken('!')};
  auto stream2 = Add(r2);
  FeedRanked(1, {ByteToken('!'), ByteToken('a')});
  FeedRanked(1, {ByteToken('!'), ByteToken('b')});  // accepting now: the stop id ends it
  outs = Messages(*stream2);
  EXPECT_EQ(Text(outs), "a");
  EXPECT_EQ(outs.back().finish_reason, FinishReason::kStop);
}

TEST_F(OutputProcessorTest, GrammarStateIsPerSample) {
  Request r = Greedy("n", 8, /*n=*/3);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 7;
  r.grammar = Gbnf(R"(root ::= "cat" | "dog" | "cow")");
  auto stream = Add(r);
  std::vector<float> flat(kFakeVocab, 0.0f);
  for (int step = 0; step < 4 && !finished_ids_.size(); ++step) {
    for (int64_t id = 0; id < 3; ++id) {
      if (std::find(released_.begin(), released_.end(), id) == released_.end()) {
        processor_->ProcessLogits(id, flat);
      }
    }
  }
  std::map<int32_t, std::string> text;
  std::map<int32_t, FinishReason> finish;
  for (const RequestOutput& o : Messages(*stream)) {
    text[o.index] += o.text;
    if (o.finish_reason != FinishReason::kNone) finish[o.index] = o.finish_reason;
  }
  ASSERT_EQ(text.size(), 3u);
  for (const auto& [i, t] : text) {
    EXPECT_TRUE(t == "cat" || t == "dog" || t == "cow") << i << ": " << t;
    EXPECT_EQ(finish[i], FinishReason::kStop);
  }
}

TEST_F(OutputProcessorTest, GrammarCutsSpeculativeProposalsAtTheFirstRefusedToken) {
  CoreHooks hooks;
  hooks.start_fork = [](const Sequence&, Sequence&) { return Status::Ok(); };
  hooks.release_sequence = [](Sequence&) {};
  hooks.request_finished = [](const std::string&) {};
  SpeculativeConfig spec;
  spec.method = SpeculativeMethod::kNgram;
  spec.num_tokens = 4;
  spec.ngram_min = 1;
  spec.ngram_max = 1;
  processor_ = std::make_unique<OutputProcessor>(*tokenizer_, OutputLimits{{kEos}, 1000, spec},
                                                 std::move(hooks));
  Request r = Greedy("s", 20);
  r.prompt_token_ids = Bytes("q1rst");  // after "q", the n-gram lookup proposes "1rst"
  r.grammar = Gbnf("root ::= [a-z]+");
  Request plain = r;
  plain.request_id = "plain";
  plain.grammar = nullptr;
  auto s1 = Add(r);
  auto s2 = Add(plain);
  FeedText(0, "q");
  FeedText(1, "q");
  EXPECT_TRUE(seqs_[0]->draft_token_ids.empty());  // "1" is refused: nothing to verify
  EXPECT_EQ(seqs_[1]->draft_token_ids, Bytes("1rst"));
}

}  // namespace
}  // namespace pagoda
