// Engine + scheduler tests against the deterministic FakeBackend.
#include "scheduler/engine.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <tuple>

#include "tests/scheduler/fake_backend.h"

namespace pagoda {
namespace {

using testing::ByteToken;
using testing::FakeBackend;
using testing::FakeGreedy;
using testing::kFakeVocab;

struct Collected {
  std::map<int32_t, std::vector<int32_t>> tokens;
  std::map<int32_t, std::string> text;
  std::map<int32_t, FinishReason> finish;
  bool finished = false;
  Usage usage;
  RequestTimes times;
};

Collected Drain(RequestStream& stream) {
  Collected c;
  RequestOutput out;
  while (!c.finished && stream.Pop(&out, EngineClock::now() + std::chrono::seconds(30))) {
    auto& t = c.tokens[out.index];
    t.insert(t.end(), out.token_ids.begin(), out.token_ids.end());
    c.text[out.index] += out.text;
    if (out.finish_reason != FinishReason::kNone) c.finish[out.index] = out.finish_reason;
    if (out.request_finished) {
      c.finished = true;
      c.usage = out.usage;
      c.times = out.times;
    }
  }
  return c;
}

std::vector<int32_t> Prompt(int32_t len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p;
  for (int32_t i = 0; i < len; ++i) p.push_back(ByteToken(static_cast<char>('A' + rng() % 26)));
  return p;
}

Request Greedy(const std::string& id, std::vector<int32_t> prompt, int32_t max_tokens) {
  Request r;
  r.request_id = id;
  r.prompt_token_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.stopping.max_tokens = max_tokens;
  return r;
}

SpeculativeConfig Ngram(int32_t k, int32_t batch_limit = 0) {
  SpeculativeConfig c;
  c.method = SpeculativeMethod::kNgram;
  c.num_tokens = k;
  c.ngram_min = 1;
  c.ngram_max = 3;
  c.disable_by_batch_size = batch_limit;
  return c;
}

// A request mix that exercises what speculation must not change: greedy and seeded sampling,
// n = 2, logprobs, stop strings and ids, max_tokens that cut through accepted proposals.
std::vector<Request> SpeculationMix() {
  std::vector<Request> mix;
  for (int i = 0; i < 12; ++i) {
    // Prompts with a period-3 pattern: with copy_period 3 the output repeats it, so proposals
    // are found and mostly right (the hash tokens in between are not).
    std::vector<int32_t> prompt = Prompt(2 + i % 4, 40 + i);
    for (int j = 0; j < 3 + i; ++j) prompt.push_back(ByteToken("abc"[j % 3]));
    Request r = Greedy("m" + std::to_string(i), prompt, 5 + 7 * (i % 5));
    if (i % 3 == 1) {
      r.sampling.temperature = 0.8f;
      r.sampling.seed = 7 + i;
    }
    if (i % 4 == 2) r.sampling.n = 2, r.sampling.seed = 3, r.sampling.temperature = 1.0f;
    if (i % 5 == 3) r.sampling.logprobs = true, r.sampling.top_logprobs = 2;
    if (i == 5) r.stopping.stop = {"cab"};
    if (i == 7) r.stopping.stop_token_ids = {ByteToken('c')};
    mix.push_back(r);
  }
  return mix;
}

struct MixResult {
  std::vector<Collected> outputs;
  int64_t steps = 0;
  EngineStats stats;
};

class EngineTest : public ::testing::Test {
 protected:
  // `draft`: the draft model's backend of speculative.method draft (kept in draft_).
  void Make(int32_t num_blocks, int32_t block_size, SchedulerConfig sc = {},
            bool prefix_caching = true, SpeculativeConfig spec = {},
            std::unique_ptr<FakeBackend> draft = nullptr) {
    backend_ = std::make_unique<FakeBackend>(num_blocks, block_size, sc);
    draft_ = std::move(draft);
    EngineConfig ec;
    ec.scheduler = sc;
    ec.speculative = spec;
    ec.enable_prefix_caching = prefix_caching;
    ec.eos_token_ids = {2};
    ec.max_waiting_requests = 4096;
    auto e = Engine::Create(*tokenizer_, *backend_, ec, draft_.get());
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
  }
  // Every step the engine built must pass the real backends' checks (ValidateStepBatch).
  void TearDown() override {
    if (!backend_) return;
    for (const Status& st : backend_->rejected_steps) ADD_FAILURE() << st.ToString();
    if (!draft_) return;
    for (const Status& st : draft_->rejected_steps) ADD_FAILURE() << "draft: " << st.ToString();
  }
  // Runs SpeculationMix() to the end on a pool of num_blocks blocks of 4 (a target with
  // copy_period 3; `draft`: the draft model's backend).
  MixResult RunMix(SpeculativeConfig spec, int32_t num_blocks,
                   std::unique_ptr<FakeBackend> draft = nullptr) {
    SchedulerConfig sc;
    sc.max_num_batched_tokens = 64;
    sc.max_num_seqs = 8;
    Make(num_blocks, 4, sc, true, spec, std::move(draft));
    backend_->copy_period = 3;
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const Request& r : SpeculationMix()) streams.push_back(Submit(r));
    EXPECT_TRUE(engine_->RunUntilIdle().ok());
    MixResult m;
    for (auto& st : streams) m.outputs.push_back(Drain(*st));
    m.steps = static_cast<int64_t>(backend_->steps.size());
    m.stats = engine_->stats();
    return m;
  }
  std::shared_ptr<RequestStream> Submit(Request r) {
    auto s = engine_->Submit(std::move(r));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : nullptr;
  }

  std::unique_ptr<Tokenizer> tokenizer_ = testing::MakeByteTokenizer();
  std::unique_ptr<FakeBackend> backend_;
  std::unique_ptr<FakeBackend> draft_;  // declared before engine_: destroyed after it
  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineTest, ManyRequestsMatchSequentialGreedy) {
  Make(256, 4);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 20; ++i)
    streams.push_back(Submit(Greedy("r" + std::to_string(i), Prompt(5 + i, i), 12)));
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  for (int i = 0; i < 20; ++i) {
    Collected c = Drain(*streams[i]);
    ASSERT_TRUE(c.finished);
    EXPECT_EQ(c.tokens[0], FakeGreedy(Prompt(5 + i, i), 12)) << i;
    EXPECT_EQ(c.finish[0], FinishReason::kLength);
    EXPECT_EQ(c.usage.completion_tokens, 12);
    EXPECT_EQ(c.usage.prompt_tokens, 5 + i);
  }
  EXPECT_EQ(engine_->stats().num_blocks_in_use, 0);
}

TEST_F(EngineTest, TokenBudgetAndSeqLimitRespectedEveryStep) {
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 16;
  sc.max_num_seqs = 4;
  Make(512, 8, sc);
  for (int i = 0; i < 10; ++i) Submit(Greedy("r" + std::to_string(i), Prompt(3 + 7 * i, i), 5));
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  ASSERT_FALSE(backend_->steps.empty());
  for (const auto& s : backend_->steps) {
    EXPECT_LE(s.num_tokens, 16);
    EXPECT_LE(s.num_seqs, 4);
  }
}

TEST_F(EngineTest, ChunkedPrefillSplitsAtTheBudgetAndDecodesKeepFlowing) {
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 32;
  sc.max_num_seqs = 8;
  sc.step_time_budget_percent = 0;  // the token budget alone cuts the chunks
  Make(512, 16, sc);
  auto decoding = Submit(Greedy("short", Prompt(4, 1), 40));
  ASSERT_TRUE(engine_->Step().ok());  // short prompt prefilled, now decoding
  auto long_stream = Submit(Greedy("long", Prompt(100, 2), 2));
  const size_t first = backend_->steps.size();
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  // The long prompt goes in chunks of 31 (budget minus the running decode), and every one of
  // those steps still carries the decode.
  std::vector<int32_t> chunks;
  for (size_t i = first; i < backend_->steps.size(); ++i) {
    const auto& s = backend_->steps[i];
    for (int32_t len : s.prefill_chunk_lens) chunks.push_back(len);
    if (!s.prefill_chunk_lens.empty()) {
      EXPECT_EQ(s.num_decode_seqs, 1) << "decode starved";
    }
  }
  EXPECT_EQ(chunks, (std::vector<int32_t>{31, 31, 31, 7}));
  EXPECT_EQ(Drain(*long_stream).tokens[0], FakeGreedy(Prompt(100, 2), 2));
  EXPECT_EQ(Drain(*decoding).tokens[0], FakeGreedy(Prompt(4, 1), 40));
}

TEST_F(EngineTest, EveryStepFeedsTheCostModelAndATightBudgetKeepsTheOutputs) {
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 64;
  sc.max_num_seqs = 8;
  sc.step_time_budget_percent = 100;  // prefill beside decodes: the minimum only
  sc.min_prefill_tokens = 3;
  Make(512, 16, sc);
  EXPECT_EQ(engine_->step_cost().num_samples(), 0);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 6; ++i) {
    streams.push_back(Submit(Greedy("r" + std::to_string(i), Prompt(10 + 9 * i, 60 + i), 12)));
    ASSERT_TRUE(engine_->Step().ok());
  }
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  EXPECT_EQ(engine_->step_cost().num_samples(),
            std::min<int64_t>(StepCostModel::kWindow, engine_->stats().num_steps));
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(Drain(*streams[static_cast<size_t>(i)]).tokens[0],
              FakeGreedy(Prompt(10 + 9 * i, 60 + i), 12))
        << i;
  }
  EXPECT_EQ(engine_->stats().num_blocks_in_use, 0);
}

TEST_F(EngineTest, PriorityPolicyServesLowerValueFirst) {
  SchedulerConfig sc;
  sc.max_num_seqs = 1;
  sc.policy = SchedulingPolicy::kPriority;
  Make(256, 4, sc);
  Request low = Greedy("low", Prompt(5, 1), 3);
  low.priority = 5;
  Request high = Greedy("high", Prompt(5, 2), 3);
  high.priority = -1;
  auto s_low = Submit(low);
  auto s_high = Submit(high);
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  Collected cl = Drain(*s_low), ch = Drain(*s_high);
  EXPECT_LT(ch.times.finished, cl.times.first_scheduled);
}

TEST_F(EngineTest, PreemptionRecomputesAndKeepsOutputsIdentical) {
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 64;
  sc.max_num_seqs = 8;
  Make(12, 4, sc, /*prefix_caching=*/false);  // 48 slots for 8 sequences of up to 24 tokens
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 8; ++i)
    streams.push_back(Submit(Greedy("r" + std::to_string(i), Prompt(6, i), 18)));
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  EXPECT_GT(engine_->stats().num_preemptions, 0);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(Drain(*streams[i]).tokens[0], FakeGreedy(Prompt(6, i), 18)) << i;
  }
  EXPECT_EQ(engine_->stats().num_blocks_in_use, 0);
}

TEST_F(EngineTest, PreemptionVictimIsLowestPriorityThenNewest) {
  SchedulerConfig sc;
  sc.max_num_seqs = 3;
  sc.policy = SchedulingPolicy::kPriority;
  Make(6, 4, sc, false);  // 24 slots
  Request a = Greedy("a", Prompt(4, 1), 12), b = Greedy("b", Prompt(4, 2), 12),
          c = Greedy("c", Prompt(4, 3), 12);
  a.priority = 0, b.priority = 9, c.priority = 0;
  auto sa = Submit(a), sb = Submit(b), sc_ = Submit(c);
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  Collected ca = Drain(*sa), cb = Drain(*sb), cc = Drain(*sc_);
  EXPECT_GT(cb.times.num_preemptions, 0);
  EXPECT_EQ(ca.times.num_preemptions, 0);
  // Every preemption the scheduler made is reported on its request (all have n == 1).
  EXPECT_EQ(ca.times.num_preemptions + cb.times.num_preemptions + cc.times.num_preemptions,
            engine_->stats().num_preemptions);
  EXPECT_EQ(cb.tokens[0], FakeGreedy(Prompt(4, 2), 12));
  EXPECT_EQ(cc.tokens[0], FakeGreedy(Prompt(4, 3), 12));
}

TEST_F(EngineTest, AbortInEveryStateFreesEveryBlock) {
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 8;
  sc.max_num_seqs = 2;
  Make(64, 4, sc);
  auto decoding = Submit(Greedy("decoding", Prompt(3, 1), 200));
  auto prefilling = Submit(Greedy("prefilling", Prompt(60, 2), 5));
  auto waiting = Submit(Greedy("waiting", Prompt(10, 3), 5));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine_->Step().ok());
  engine_->Abort("decoding");
  engine_->Abort("prefilling");
  engine_->Abort("waiting");
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  for (auto* s : {decoding.get(), prefilling.get(), waiting.get()}) {
    Collected c = Drain(*s);
    EXPECT_TRUE(c.finished);
    EXPECT_EQ(c.finish[0], FinishReason::kAbort);
  }
  EXPECT_EQ(engine_->stats().num_blocks_in_use, 0);
  EXPECT_EQ(engine_->stats().num_running + engine_->stats().num_waiting, 0);
}

TEST_F(EngineTest, PrefixCacheHitsSkipCompute) {
  Make(128, 4);
  const auto prompt = Prompt(41, 7);
  auto first = Submit(Greedy("first", prompt, 3));
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  const int64_t before = backend_->tokens_computed;
  auto second = Submit(Greedy("second", prompt, 3));
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  Collected c1 = Drain(*first), c2 = Drain(*second);
  EXPECT_EQ(c2.tokens[0], c1.tokens[0]);
  EXPECT_EQ(c2.usage.cached_prompt_tokens, 40);          // all full blocks (never the last token)
  EXPECT_EQ(backend_->tokens_computed - before, 1 + 2);  // last prompt token + 2 decodes
  EXPECT_GT(engine_->stats().prefix_cache_hits, 0);
}

TEST_F(EngineTest, StopStringsTokenIdsAndEos) {
  Make(128, 4);
  const auto prompt = Prompt(5, 3);
  const auto greedy = FakeGreedy(prompt, 20);
  std::string text;
  for (int32_t t : greedy) text += static_cast<char>(t - 3);
  Request r = Greedy("stop", prompt, 20);
  r.stopping.stop = {text.substr(6, 3)};
  auto s1 = Submit(r);
  Request r2 = Greedy("stopid", prompt, 20);
  r2.stopping.stop_token_ids = {greedy[4]};
  auto s2 = Submit(r2);
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  Collected c1 = Drain(*s1), c2 = Drain(*s2);
  EXPECT_EQ(c1.finish[0], FinishReason::kStop);
  EXPECT_EQ(c1.text[0], text.substr(0, text.find(text.substr(6, 3))));
  EXPECT_EQ(c2.finish[0], FinishReason::kStop);
  const auto first_stop = std::find(greedy.begin(), greedy.end(), greedy[4]) - greedy.begin();
  EXPECT_EQ(c2.tokens[0].size(), static_cast<size_t>(first_stop));
}

TEST_F(EngineTest, ValidationAndQueueLimits) {
  Make(16, 4);
  EXPECT_EQ(engine_->Submit(Greedy("e", {}, 3)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->Submit(Greedy("v", {999}, 3)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->Submit(Greedy("m", {5}, 0)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->Submit(Greedy("big", Prompt(10, 1), 100)).status().code(),
            StatusCode::kInvalidArgument);  // more than the 64-slot cache
  Request bad = Greedy("t", {5}, 3);
  bad.sampling.top_p = 0.0f;
  EXPECT_EQ(engine_->Submit(bad).status().code(), StatusCode::kInvalidArgument);
  Request biased = Greedy("b", {5}, 3);
  biased.sampling.logit_bias = {{kFakeVocab, 1.0f}};
  const Status out_of_vocab = engine_->Submit(biased).status();
  EXPECT_EQ(out_of_vocab.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out_of_vocab.message().rfind("logit_bias." + std::to_string(kFakeVocab) + ":", 0), 0u)
      << out_of_vocab.message();
  biased.sampling.logit_bias = {{7, 150.0f}};
  EXPECT_EQ(engine_->Submit(biased).status().message().rfind("logit_bias.7: bias", 0), 0u);
  ASSERT_TRUE(engine_->Submit(Greedy("dup", {5}, 3)).ok());
  EXPECT_EQ(engine_->Submit(Greedy("dup", {5}, 3)).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, LogitBiasSteersEveryStep) {
  Make(64, 4);
  const std::vector<int32_t> prompt = Prompt(6, 3);
  const std::vector<int32_t> greedy = FakeGreedy(prompt, 8);
  const int32_t forced = ByteToken('z');
  ASSERT_NE(greedy[0], forced);
  Request r = Greedy("forced", prompt, 8);
  r.sampling.logit_bias = {{forced, 100.0f}};
  Request banned = Greedy("banned", prompt, 8);
  banned.sampling.logit_bias = {{greedy[0], -100.0f}};
  auto s1 = Submit(std::move(r));
  auto s2 = Submit(std::move(banned));
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  EXPECT_EQ(Drain(*s1).tokens[0], std::vector<int32_t>(8, forced));
  const Collected c2 = Drain(*s2);
  ASSERT_FALSE(c2.tokens.at(0).empty());
  EXPECT_NE(c2.tokens.at(0)[0], greedy[0]);
  for (int32_t t : c2.tokens.at(0)) EXPECT_NE(t, greedy[0]);
  EXPECT_EQ(engine_->stats().num_blocks_in_use, 0);
}

// engine.max_model_len: 1 made a server that rejected every request; it is refused at start-up.
TEST(EngineConfigTest, MaxModelLenOfOneIsRefused) {
  EngineConfig ec;
  ec.max_model_len = 1;
  EXPECT_EQ(ValidateEngineConfig(ec).message(),
            "engine.max_model_len: 1 leaves no room for a prompt token and a generated one (0: the "
            "model's context length, else >= 2)");
  ec.max_model_len = 2;
  EXPECT_TRUE(ValidateEngineConfig(ec).ok());
}

TEST_F(EngineTest, BackendFailureFailsOnlyThatStepsRequests) {
  Make(128, 4);
  auto a = Submit(Greedy("a", Prompt(5, 1), 4));
  backend_->fail_next_step = true;
  EXPECT_EQ(engine_->Step().code(), StatusCode::kInternal);
  auto b = Submit(Greedy("b", Prompt(5, 2), 4));
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  EXPECT_EQ(Drain(*a).finish[0], FinishReason::kError);
  EXPECT_EQ(Drain(*b).tokens[0], FakeGreedy(Prompt(5, 2), 4));
  EXPECT_EQ(engine_->stats().num_blocks_in_use, 0);
}

TEST_F(EngineTest, NSamplesShareThePromptAndDiffer) {
  Make(128, 4);
  Request r = Greedy("n", Prompt(9, 1), 10);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 42;
  r.sampling.n = 4;
  auto s = Submit(r);
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  Collected c = Drain(*s);
  ASSERT_EQ(c.tokens.size(), 4u);
  std::set<std::vector<int32_t>> distinct;
  for (auto& [i, t] : c.tokens) {
    EXPECT_EQ(t.size(), 10u);
    distinct.insert(t);
  }
  EXPECT_GT(distinct.size(), 1u);
  EXPECT_EQ(backend_->steps[0].num_tokens, 9);  // the prompt computed once
  EXPECT_EQ(engine_->stats().num_blocks_in_use, 0);
}

TEST_F(EngineTest, MoreSamplesThanMaxNumSeqsIsRejectedUpFront) {
  SchedulerConfig sc;
  sc.max_num_seqs = 2;
  Make(128, 4, sc);
  Request r = Greedy("n3", Prompt(5, 1), 4);
  r.sampling.n = 3;
  const auto st = engine_->Submit(r).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("n: 3"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("engine.max_num_seqs (2)"), std::string::npos) << st.ToString();
  r.sampling.n = 2;  // exactly the cap: admitted and served
  r.request_id = "n2";
  auto ok = Submit(r);
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  Collected c = Drain(*ok);
  EXPECT_EQ(c.finish[0], FinishReason::kLength);
  EXPECT_EQ(c.finish[1], FinishReason::kLength);
}

// n = 64 beside a running stream under max_num_seqs 64: the samples wait until the batch has
// room for all of them; no step carries more than 64 sequences and nothing fails.
TEST_F(EngineTest, ForkedSamplesAreAdmittedOnlyWhenTheBatchHasRoom) {
  SchedulerConfig sc;
  sc.max_num_seqs = 64;
  Make(1024, 4, sc);
  auto stream = Submit(Greedy("stream", Prompt(6, 1), 30));
  ASSERT_TRUE(engine_->Step().ok());
  Request wide = Greedy("wide", Prompt(7, 2), 5);
  wide.sampling.n = 64;
  wide.sampling.temperature = 1.0f;
  // Every sample runs to max_tokens: without this an EOS drawn at temperature 1 ended one early
  // in 46 of 3000 runs (the finish reason below then kStop).
  wide.stopping.ignore_eos = true;
  auto samples = Submit(wide);
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  Collected cs = Drain(*stream), cw = Drain(*samples);
  EXPECT_EQ(cs.tokens[0], FakeGreedy(Prompt(6, 1), 30));
  EXPECT_EQ(cs.finish[0], FinishReason::kLength);
  ASSERT_EQ(cw.finish.size(), 64u);
  for (const auto& [i, f] : cw.finish) EXPECT_EQ(f, FinishReason::kLength) << i;
  for (const auto& step : backend_->steps) EXPECT_LE(step.num_seqs, 64);
  EXPECT_EQ(engine_->stats().num_blocks_in_use, 0);
}

// A small KV pool under n > 1 traffic: samples are preempted and recomputed, each one on its
// own, and every valid request ends normally -- never with an error.
TEST_F(EngineTest, SmallKvPoolWithManySampledRequestsNeverFails) {
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 64;
  sc.max_num_seqs = 8;
  Make(24, 4, sc);
  std::mt19937 rng(17);
  std::vector<std::pair<Request, std::shared_ptr<RequestStream>>> live;
  for (int i = 0; i < 300; ++i) {
    Request r = Greedy("k" + std::to_string(i), Prompt(1 + rng() % 20, i), 1 + rng() % 24);
    r.sampling.n = 1 + rng() % 8;
    if (rng() % 3 == 0) r.sampling.temperature = 0.8f;
    auto s = engine_->Submit(r);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    live.emplace_back(r, *s);
    if (i % 10 == 9) {
      ASSERT_TRUE(engine_->Step().ok());
    }
  }
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  EXPECT_GT(engine_->stats().num_preemptions, 0);
  for (auto& [r, s] : live) {
    Collected c = Drain(*s);
    ASSERT_TRUE(c.finished) << r.request_id;
    ASSERT_EQ(c.finish.size(), static_cast<size_t>(r.sampling.n)) << r.request_id;
    for (const auto& [i, f] : c.finish) {
      EXPECT_TRUE(f == FinishReason::kLength || f == FinishReason::kStop) << r.request_id;
    }
    if (r.sampling.temperature == 0.0f) {
      for (const auto& [i, t] : c.tokens) {
        EXPECT_EQ(t, FakeGreedy(r.prompt_token_ids, r.stopping.max_tokens)) << r.request_id;
      }
    }
  }
  for (const auto& step : backend_->steps) EXPECT_LE(step.num_seqs, 8);
  EXPECT_EQ(engine_->stats().num_blocks_in_use, 0);
  EXPECT_EQ(engine_->stats().num_running + engine_->stats().num_waiting, 0);
}

TEST_F(EngineTest, SeededSamplingIsIndependentOfTheBatch) {
  Make(1024, 4);
  Request r = Greedy("x", Prompt(7, 3), 16);
  r.sampling.temperature = 1.5f;
  r.sampling.seed = 1234;
  auto alone = Submit(r);
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  const auto expected = Drain(*alone).tokens[0];
  std::mt19937 rng(5);
  for (int i = 0; i < 16; ++i) {
    Request o = Greedy("o" + std::to_string(i), Prompt(3 + rng() % 20, 100 + i), 5 + rng() % 20);
    o.sampling.temperature = 1.0f;
    Submit(o);
  }
  r.request_id = "x2";
  auto batched = Submit(r);
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  EXPECT_EQ(Drain(*batched).tokens[0], expected);
}

TEST_F(EngineTest, StressRandomRequestsAndAborts) {
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 64;
  sc.max_num_seqs = 16;
  Make(40, 4, sc);
  std::mt19937 rng(99);
  engine_->Start();
  std::vector<std::tuple<std::string, std::shared_ptr<RequestStream>, bool>> live;
  for (int i = 0; i < 2000; ++i) {
    Request r = Greedy("s" + std::to_string(i), Prompt(1 + rng() % 30, i), 1 + rng() % 40);
    r.sampling.temperature = (rng() % 2) ? 0.0f : 0.7f;
    r.sampling.top_k = rng() % 5;
    r.sampling.n = 1 + (rng() % 8 == 0);
    auto s = engine_->Submit(r);
    if (!s.ok()) continue;  // queue full: fine
    const bool aborted = rng() % 5 == 0;
    live.emplace_back(r.request_id, *s, aborted);
    if (aborted) engine_->Abort(r.request_id);
  }
  for (auto& [id, s, aborted] : live) {
    Collected c = Drain(*s);
    EXPECT_TRUE(c.finished) << id;
    for (const auto& [i, f] : c.finish) {
      EXPECT_NE(f, FinishReason::kError) << id;
      if (!aborted) {
        EXPECT_NE(f, FinishReason::kAbort) << id;
      }
    }
  }
  engine_->Stop();
  EXPECT_EQ(engine_->stats().num_blocks_in_use, 0);
}

// ---- speculative decoding (n-gram) ------------------------------------------------------

TEST_F(EngineTest, NgramSpeculationKeepsEveryOutputAndFreesEveryBlock) {
  auto run = [&](SpeculativeConfig spec, int32_t num_blocks) { return RunMix(spec, num_blocks); };
  const MixResult plain = run({}, 512);
  ASSERT_EQ(plain.stats.speculative.num_drafts, 0);
  // Roomy and tight KV pools (the tight one preempts with proposals in flight).
  for (int32_t num_blocks : {512, 24}) {
    for (int32_t k : {1, 4}) {
      const MixResult spec = run(Ngram(k), num_blocks);
      SCOPED_TRACE("num_blocks " + std::to_string(num_blocks) + " k " + std::to_string(k));
      for (size_t i = 0; i < plain.outputs.size(); ++i) {
        EXPECT_EQ(spec.outputs[i].tokens, plain.outputs[i].tokens) << i;
        EXPECT_EQ(spec.outputs[i].text, plain.outputs[i].text) << i;
        EXPECT_EQ(spec.outputs[i].finish, plain.outputs[i].finish) << i;
        EXPECT_EQ(spec.outputs[i].usage.completion_tokens,
                  plain.outputs[i].usage.completion_tokens);
      }
      const SpeculativeStats& s = spec.stats.speculative;
      EXPECT_GT(s.num_drafts, 0);
      EXPECT_GT(s.num_accepted_tokens, 0);
      EXPECT_LT(s.num_accepted_tokens, s.num_draft_tokens);  // the hash tokens reject some
      EXPECT_LE(s.num_draft_tokens, s.num_drafts * k);
      ASSERT_EQ(s.accepted_per_position.size(), static_cast<size_t>(k));
      EXPECT_GE(s.accepted_per_position[0], s.accepted_per_position[k - 1]);
      EXPECT_EQ(spec.stats.num_blocks_in_use, 0);
      if (num_blocks == 512) {
        EXPECT_LT(spec.steps, plain.steps);
      }
    }
  }
}

TEST_F(EngineTest, NgramSpeculationRespectsTheRequestSwitchAndTheBatchLimit) {
  Make(512, 4, {}, true, Ngram(4, /*batch_limit=*/2));
  backend_->copy_period = 3;
  std::vector<int32_t> prompt = Prompt(3, 1);
  for (int j = 0; j < 9; ++j) prompt.push_back(ByteToken("abc"[j % 3]));
  Request off = Greedy("off", prompt, 20);
  off.speculative = false;
  Submit(off);
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  EXPECT_EQ(engine_->stats().speculative.num_drafts, 0);
  // Three sequences decoding: above the limit of 2, no step carries proposals.
  for (int i = 0; i < 3; ++i) Submit(Greedy("b" + std::to_string(i), prompt, 20));
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  EXPECT_EQ(engine_->stats().speculative.num_drafts, 0);
  Submit(Greedy("alone", prompt, 20));
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  EXPECT_GT(engine_->stats().speculative.num_drafts, 0);
  EXPECT_EQ(engine_->stats().num_blocks_in_use, 0);
}

TEST_F(EngineTest, NgramProposalsStopAtMaxTokensAndTheContext) {
  Make(512, 4, {}, true, Ngram(8));
  backend_->copy_period = 3;
  std::vector<int32_t> prompt;
  for (int j = 0; j < 12; ++j) prompt.push_back(ByteToken("abc"[j % 3]));
  auto s = Submit(Greedy("r", prompt, 10));
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  const Collected c = Drain(*s);
  EXPECT_EQ(c.tokens.at(0).size(), 10u);
  EXPECT_EQ(c.finish.at(0), FinishReason::kLength);
  // Every proposal is right here; none reaches past max_tokens (10 = 1 + 8 accepted + 1).
  const SpeculativeStats& st = engine_->stats().speculative;
  EXPECT_EQ(st.num_accepted_tokens, st.num_draft_tokens);
  EXPECT_EQ(st.num_draft_tokens, 8);
  EXPECT_EQ(backend_->steps.size(), 2u);  // the prompt, then one verification of 8 + 1
}

SpeculativeConfig Draft(int32_t k) {
  SpeculativeConfig c;
  c.method = SpeculativeMethod::kDraft;
  c.num_tokens = k;
  c.draft_model = "fake";
  c.disable_by_batch_size = 0;
  return c;
}

// The draft model's proposals (a FakeBackend: the same greedy rule as the target when its
// copy_period is the same, since both read the context back through their own KV caches) are
// verified exactly as n-gram ones: every output of the mix stays the same, with a roomy or a
// tight target pool (preemption) and a roomy or tight draft pool (proposals dropped when the
// draft cache is full); no block of either cache stays in use.
TEST_F(EngineTest, DraftSpeculationKeepsEveryOutputAndFreesEveryBlock) {
  auto run = [&](SpeculativeConfig spec, int32_t num_blocks, int32_t draft_blocks,
                 int32_t draft_period) {
    std::unique_ptr<FakeBackend> draft;
    if (spec.method == SpeculativeMethod::kDraft) {
      SchedulerConfig sc;
      sc.max_num_batched_tokens = 64;
      sc.max_num_seqs = 8;
      draft = std::make_unique<FakeBackend>(draft_blocks, 4, sc);
      draft->copy_period = draft_period;
    }
    return RunMix(spec, num_blocks, std::move(draft));
  };
  const MixResult plain = run({}, 512, 0, 0);
  struct Case {
    int32_t num_blocks, draft_blocks, draft_period, k;
  };
  for (const Case& c :
       {Case{512, 512, 3, 4}, Case{24, 512, 3, 3}, Case{512, 12, 3, 4}, Case{512, 512, 0, 2}}) {
    const MixResult spec = run(Draft(c.k), c.num_blocks, c.draft_blocks, c.draft_period);
    SCOPED_TRACE("blocks " + std::to_string(c.num_blocks) + " draft blocks " +
                 std::to_string(c.draft_blocks) + " period " + std::to_string(c.draft_period));
    for (size_t i = 0; i < plain.outputs.size(); ++i) {
      EXPECT_EQ(spec.outputs[i].tokens, plain.outputs[i].tokens) << i;
      EXPECT_EQ(spec.outputs[i].text, plain.outputs[i].text) << i;
      EXPECT_EQ(spec.outputs[i].finish, plain.outputs[i].finish) << i;
    }
    const SpeculativeStats& s = spec.stats.speculative;
    EXPECT_GT(s.num_drafts, 0);
    EXPECT_LE(s.num_draft_tokens, s.num_drafts * c.k);
    EXPECT_EQ(spec.stats.num_blocks_in_use, 0);
    EXPECT_EQ(spec.stats.draft_num_blocks_in_use, 0);
    if (c.draft_period == 3 && c.num_blocks == 512 && c.draft_blocks == 512) {
      EXPECT_GT(s.num_accepted_tokens, s.num_draft_tokens / 2);  // the same rule: mostly right
      EXPECT_LT(spec.steps, plain.steps);
    }
  }
}

// A draft identical to the target proposes exactly the target's greedy tokens: for greedy
// requests every proposal is accepted, which holds only if the draft cache keeps accepted
// tokens, drops rejected ones and catches up on the tokens the target sampled.
TEST_F(EngineTest, IdenticalDraftModelIsAlwaysAccepted) {
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 32;  // long prompts catch up in several draft steps
  sc.max_num_seqs = 4;
  auto draft = std::make_unique<FakeBackend>(256, 4, sc);
  Make(256, 4, sc, true, Draft(4), std::move(draft));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; ++i)
    streams.push_back(Submit(Greedy("g" + std::to_string(i), Prompt(20 + 17 * i, i), 30)));
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  for (int i = 0; i < 4; ++i) {
    const Collected c = Drain(*streams[i]);
    EXPECT_EQ(c.tokens.at(0), FakeGreedy(Prompt(20 + 17 * i, i), 30)) << i;
  }
  const EngineStats st = engine_->stats();
  EXPECT_GT(st.speculative.num_draft_tokens, 0);
  EXPECT_EQ(st.speculative.num_accepted_tokens, st.speculative.num_draft_tokens);
  EXPECT_EQ(st.draft_num_blocks_in_use, 0);
  EXPECT_TRUE(draft_->rejected_steps.empty());
}

// KV accounting under randomized accept / reject (period-3 text and hash tokens), preemption
// (tight pools), cancellation at random steps and failed steps, with n-gram and draft proposals:
// every request finishes, greedy ones that ran to max_tokens give the tokens of a run without
// speculation or chaos, and no block of the model's or the draft's cache stays in use.
TEST_F(EngineTest, SpeculationLeaksNoBlocksUnderRandomAbortsAndPreemption) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    SchedulerConfig sc;
    sc.max_num_batched_tokens = 48;
    sc.max_num_seqs = 6;
    std::vector<Request> requests;
    for (int i = 0; i < 24; ++i) {
      std::vector<int32_t> prompt = Prompt(1 + rng() % 6, 100 * seed + i);
      for (uint32_t j = 0, n = rng() % 12; j < n; ++j) prompt.push_back(ByteToken("xyz"[j % 3]));
      Request r = Greedy("q" + std::to_string(i), prompt, 1 + rng() % 30);
      if (rng() % 3 == 0) r.sampling.temperature = 0.9f, r.sampling.seed = rng();
      if (rng() % 6 == 0) r.sampling.n = 2, r.sampling.temperature = 1.0f;
      requests.push_back(r);
    }
    auto submit_all = [&] {
      std::vector<std::shared_ptr<RequestStream>> streams;
      for (const Request& r : requests) streams.push_back(Submit(r));
      return streams;
    };
    Make(512, 4, sc);
    backend_->copy_period = 3;
    std::vector<std::shared_ptr<RequestStream>> plain_streams = submit_all();
    ASSERT_TRUE(engine_->RunUntilIdle().ok());
    std::vector<Collected> plain;
    for (auto& st : plain_streams) plain.push_back(Drain(*st));

    const bool draft = seed % 2 == 0;
    SpeculativeConfig spec = draft ? Draft(1 + seed % 5) : Ngram(1 + seed % 5);
    std::unique_ptr<FakeBackend> draft_backend;
    if (draft) {
      draft_backend = std::make_unique<FakeBackend>(seed == 4 ? 16 : 256, 4, sc);
      draft_backend->copy_period = 3;
    }
    Make(seed <= 2 ? 256 : 20, 4, sc, true, spec, std::move(draft_backend));
    backend_->copy_period = 3;
    std::vector<std::shared_ptr<RequestStream>> streams = submit_all();
    std::set<std::string> aborted;
    backend_->on_step = [&](int64_t step) {
      if (rng() % 4 == 0) {
        const std::string id = "q" + std::to_string(rng() % 24);
        aborted.insert(id);
        engine_->Abort(id);
      }
      if (step % 37 == 36) backend_->fail_next_step = true;
    };
    ASSERT_TRUE(engine_->RunUntilIdle().ok());
    int compared = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      const Collected c = Drain(*streams[i]);
      EXPECT_TRUE(c.finished) << i;
      const bool clean = !aborted.contains(requests[i].request_id) && c.finish.count(0) &&
                         c.finish.at(0) == FinishReason::kLength;
      if (requests[i].sampling.temperature == 0.0f && clean) {
        EXPECT_EQ(c.tokens.at(0), plain[i].tokens.at(0)) << i;
        ++compared;
      }
    }
    EXPECT_GT(compared, 0);
    EXPECT_FALSE(aborted.empty());
    const EngineStats st = engine_->stats();
    if (seed > 2) {
      EXPECT_GT(st.num_preemptions, 0);
    }
    EXPECT_EQ(st.num_blocks_in_use, 0);
    EXPECT_EQ(st.draft_num_blocks_in_use, 0);
    EXPECT_EQ(st.num_running + st.num_waiting, 0);
    EXPECT_GT(st.speculative.num_accepted_tokens, 0);
    EXPECT_LT(st.speculative.num_accepted_tokens, st.speculative.num_draft_tokens);
    backend_->on_step = nullptr;
  }
}

// Above speculative.disable_by_batch_size decoding sequences the draft model is not run at all
// (its proposals could not be verified); alone, it is.
TEST_F(EngineTest, DraftModelIsNotRunAboveTheBatchLimit) {
  SpeculativeConfig spec = Draft(4);
  spec.disable_by_batch_size = 2;
  Make(256, 4, {}, true, spec, std::make_unique<FakeBackend>(256, 4, SchedulerConfig{}));
  for (int i = 0; i < 3; ++i) Submit(Greedy("b" + std::to_string(i), Prompt(9, 7), 12));
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  EXPECT_TRUE(draft_->steps.empty());
  EXPECT_EQ(engine_->stats().speculative.num_drafts, 0);
  Submit(Greedy("alone", Prompt(9, 7), 12));
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  EXPECT_FALSE(draft_->steps.empty());
  EXPECT_GT(engine_->stats().speculative.num_drafts, 0);
}

TEST(EngineConfigTest, DraftSpeculationNeedsADraftBackendWithTheSameVocabulary) {
  auto tokenizer = testing::MakeByteTokenizer();
  FakeBackend backend(64, 4, {});
  EngineConfig ec;
  ec.speculative = Draft(4);
  auto e = Engine::Create(*tokenizer, backend, ec);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("speculative.draft_model"), std::string::npos);
  FakeBackend draft(64, 4, {});
  e = Engine::Create(*tokenizer, backend, ec, &draft);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  ec.speculative.draft_model.clear();
  e = Engine::Create(*tokenizer, backend, ec, &draft);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("speculative.draft_model"), std::string::npos);
}

TEST(EngineConfigTest, SpeculationNeedsMultiTokenLogits) {
  auto tokenizer = testing::MakeByteTokenizer();
  FakeBackend backend(64, 4, {});
  backend.multi_token_logits(false);
  EngineConfig ec;
  ec.speculative = Ngram(4);
  auto e = Engine::Create(*tokenizer, backend, ec);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("speculative.method"), std::string::npos);
  ec.speculative.ngram_min = 5;
  backend.multi_token_logits(true);
  e = Engine::Create(*tokenizer, backend, ec);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("speculative.ngram_min"), std::string::npos);
}

}  // namespace
}  // namespace pagoda
