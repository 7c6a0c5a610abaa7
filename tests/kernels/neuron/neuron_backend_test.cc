// The Neuron backend against the fake libnrt: start-up errors (exact messages, exit codes),
// greedy parity with the CPU backend through the engine, failure injection and leak counters.
#include "kernels/neuron/neuron_backend.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "kernels/cpu/cpu_backend.h"
#include "runtime/runtime.h"
#include "scheduler/engine.h"
#include "tests/kernels/malformed_batches.h"
#include "tests/kernels/neuron/fake_artifacts.h"
#include "tests/kernels/neuron/fake_nrt.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

const std::string kModel = testing::SharedPath("models/aidreams260K/aidreams260K-f32.gguf");

// The fake runtime's counters. A leak check reads them after using the fake: it fails when the
// fake is not loaded (zero counters would pass every check). A baseline taken before the first
// use (`may_be_unloaded`) is all zeros then.
FakeNrtCounters Counters(bool may_be_unloaded = false) {
  void* h = dlopen(FAKE_NRT_PATH, RTLD_NOW | RTLD_NOLOAD);
  FakeNrtCounters c{};
  if (h == nullptr) {
    if (!may_be_unloaded) {
      ADD_FAILURE() << "the fake libnrt is not loaded: its leak counters cannot be read";
    }
    return c;
  }
  reinterpret_cast<FakeNrtGetCountersFn>(dlsym(h, "fake_nrt_get_counters"))(&c);
  return c;
}

class NeuronBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = LoadModel(kModel);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value();
    fa_.model_path = kModel;
    fa_.config = model_->config;
    fa_.buckets = {{"decode_b1", true, 1, 8},
                   {"decode_b2", true, 2, 8},
                   {"decode_b4", true, 4, 8},
                   {"prefill_t16", false, 16, 8},
                   {"prefill_t64", false, 64, 8}};
    opts_.runtime_library = FAKE_NRT_PATH;
    opts_.artifacts_dir = dir_.File("");
    opts_.artifacts_dir.pop_back();  // no trailing slash
    ::unsetenv("FAKE_NRT_FAIL");
  }
  Result<std::unique_ptr<Backend>> Create() {
    Status st = testing::WriteFakeArtifacts(opts_.artifacts_dir, fa_);
    if (!st.ok()) return st;
    return CreateNeuronBackend(model_->config, opts_, StepLimits{64, 8});
  }
  std::unique_ptr<Engine> MakeEngine(Backend& b) {
    EngineConfig ec;
    ec.scheduler.max_num_seqs = 8;
    ec.scheduler.max_num_batched_tokens = 64;
    auto e = Engine::Create(*model_->tokenizer, b, ec);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return std::move(e).value();
  }

  testing::TempDir dir_;
  std::unique_ptr<Model> model_;
  testing::FakeArtifactOptions fa_;
  NeuronOptions opts_;
};

TEST_F(NeuronBackendTest, LibraryMissing) {
  opts_.runtime_library = "/nonexistent/libnrt.so.1";
  auto b = Create();
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "neuron backend: cannot load the Neuron runtime library (libnrt.so.1).\n"
            "  tried: /nonexistent/libnrt.so.1: /nonexistent/libnrt.so.1: cannot open shared "
            "object file: No such file or directory\n"
            "  The Neuron backend needs an Inf2/Trn1/Trn2 instance with the aws-neuronx-dkms "
            "driver and the\n  aws-neuronx-runtime-lib package. Set neuron.runtime_library to "
            "its path, or run with `backend.type: cpu`.");
  EXPECT_EQ(StartupExitCode(BackendStartupError(b.status())), kExitBackendUnavailable);
}

TEST_F(NeuronBackendTest, SymbolMissing) {
  opts_.runtime_library = FAKE_NRT_STUB_PATH;
  auto b = Create();
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), std::string("neuron backend: ") + FAKE_NRT_STUB_PATH +
                                      " lacks required symbol 'nrt_execute' (libnrt 2.99.0).");
  EXPECT_EQ(StartupExitCode(BackendStartupError(b.status())), kExitBackendUnavailable);
}

TEST_F(NeuronBackendTest, ManifestMismatchPrintsADiff) {
  fa_.wrong_shape_program = "decode_b2";
  auto b = Create();
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "neuron backend: program 'decode_b2' (" + opts_.artifacts_dir +
                "/decode_b2.neff) does not match the manifest (- manifest, + runtime):\n"
                "  - input input_ids i32[2] (8 bytes)\n  + input input_ids i32[3] (12 bytes)\n");
  EXPECT_EQ(StartupExitCode(BackendStartupError(b.status())), kExitBackendArtifacts);
  EXPECT_EQ(Counters().leaked_at_last_close, 0);
}

TEST_F(NeuronBackendTest, ModelDimsAndLncMismatch) {
  fa_.manifest_vocab = 1000;
  auto b = Create();
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "neuron backend: manifest " + opts_.artifacts_dir +
                                      "/manifest.json: model.vocab is 1000 but the model has 512");
  fa_.manifest_vocab = 0;
  opts_.logical_nc_config = 1;
  b = Create();
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "neuron backend: LNC mismatch: neuron.logical_nc_config is 1 but the manifest " +
                opts_.artifacts_dir +
                "/manifest.json was compiled for lnc 2 (recompile with -lnc 1, or set "
                "neuron.logical_nc_config: 2)");
  EXPECT_EQ(StartupExitCode(BackendStartupError(b.status())), kExitBackendArtifacts);
}

TEST_F(NeuronBackendTest, EnvConflict) {
  opts_.visible_cores = "0";
  ::setenv("NEURON_RT_VISIBLE_CORES", "1", 1);
  auto b = Create();
  ::unsetenv("NEURON_RT_VISIBLE_CORES");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "neuron backend: environment NEURON_RT_VISIBLE_CORES=\"1\" conflicts with "
            "neuron.visible_cores \"0\" (unset the variable or make the two equal)");
  EXPECT_EQ(StartupExitCode(BackendStartupError(b.status())), kExitBadConfig);
}

TEST_F(NeuronBackendTest, BucketsEnableLoadsOnlyTheListedPrograms) {
  opts_.buckets_enable = {"prefill_t16", "decode_b2"};
  const int64_t before = Counters(/*may_be_unloaded=*/true).models_loaded;
  {
    auto b = Create();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_EQ(Counters().models_loaded - before, 2);
    EXPECT_EQ((*b)->capabilities().max_model_len, 128);
  }
  opts_.buckets_enable = {"decode_b2", "decode_b2"};
  auto b = Create();
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "neuron backend: neuron.buckets.enable: 'decode_b2' is listed more than once");
  EXPECT_EQ(StartupExitCode(BackendStartupError(b.status())), kExitBadConfig);
  opts_.buckets_enable = {"decode_b1", "decode_b4"};
  b = Create();
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "neuron backend: manifest " + opts_.artifacts_dir +
                                      "/manifest.json: needs at least one prefill and one decode "
                                      "program");
}

TEST_F(NeuronBackendTest, InitFailureHasDiagnostics) {
  ::setenv("FAKE_NRT_FAIL", "nrt_init:1", 1);
  auto b = Create();
  ::unsetenv("FAKE_NRT_FAIL");
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(b.status().message().starts_with(
      "neuron backend: nrt_init failed: NRT_FAILURE (1).\n  /dev/neuron*: "))
      << b.status().message();
  EXPECT_NE(b.status().message().find("neuron-ls"), std::string::npos);
  EXPECT_EQ(StartupExitCode(BackendStartupError(b.status())), kExitBackendUnavailable);
}

TEST_F(NeuronBackendTest, NonFiniteWarmupLogitsFailStartup) {
  ::setenv("FAKE_NRT_NAN_OUTPUT", "1", 1);
  auto b = Create();
  ::unsetenv("FAKE_NRT_NAN_OUTPUT");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "neuron backend: warm-up of 'decode_b1' produced non-finite logits");
  EXPECT_EQ(StartupExitCode(BackendStartupError(b.status())), kExitBackendArtifacts);
  EXPECT_EQ(Counters().leaked_at_last_close, 0);
}

// Runs every reference prompt concurrently; returns the greedy tokens per prompt ("" on error).
std::vector<std::vector<int32_t>> RunPrompts(Engine& engine, const nlohmann::json& ref,
                                             int max_tokens, std::vector<bool>* failed) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  EXPECT_GE(ref["cases"].size(), 1u) << "no reference cases: nothing would be checked";
  for (size_t i = 0; i < ref["cases"].size(); ++i) {
    Request r;
    r.request_id = "r" + std::to_string(i);
    r.prompt_token_ids = ref["cases"][i]["prompt_tokens"].get<std::vector<int32_t>>();
    r.sampling.temperature = 0;
    r.stopping.max_tokens = max_tokens;
    r.stopping.ignore_eos = true;
    auto s = engine.Submit(r);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    streams.push_back(*s);
  }
  while (engine.HasWork()) (void)engine.Step();
  std::vector<std::vector<int32_t>> out(streams.size());
  failed->assign(streams.size(), false);
  for (size_t i = 0; i < streams.size(); ++i) {
    RequestOutput o;
    while (streams[i]->Pop(&o, EngineClock::now())) {
      out[i].insert(out[i].end(), o.token_ids.begin(), o.token_ids.end());
      if (o.finish_reason == FinishReason::kError) (*failed)[i] = true;
    }
  }
  return out;
}

TEST_F(NeuronBackendTest, GreedyTokensMatchTheCpuBackend) {
  const auto ref = testing::LoadJson(testing::SharedPath("models/aidreams260K/reference.json"));
  RuntimeConfig rc;
  rc.engine.scheduler.max_num_seqs = 8;
  rc.engine.scheduler.max_num_batched_tokens = 64;
  auto cpu = BuildRuntime(*model_, rc);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  std::vector<bool> failed;
  const auto want = RunPrompts(*cpu->engine, ref, 40, &failed);
  {
    auto b = Create();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    auto engine = MakeEngine(**b);
    const auto got = RunPrompts(*engine, ref, 40, &failed);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_FALSE(failed[i]);
      EXPECT_EQ(got[i], want[i]) << "prompt " << i;
      const auto greedy = ref["cases"][i]["greedy_tokens"].get<std::vector<int32_t>>();
      const size_t n = std::min<size_t>(greedy.size(), 40);
      EXPECT_EQ(std::vector<int32_t>(got[i].begin(), got[i].begin() + std::min(n, got[i].size())),
                std::vector<int32_t>(greedy.begin(), greedy.begin() + n))
          << "prompt " << i;
    }
    auto* nb = dynamic_cast<neuron::NeuronBackend*>(b->get());
    EXPECT_TRUE(nb->healthy());
    EXPECT_GT(nb->num_executions(), 0);
    engine.reset();
  }
  const FakeNrtCounters c = Counters();
  EXPECT_EQ(c.leaked_at_last_close, 0);
  EXPECT_EQ(c.tensors_allocated, c.tensors_freed);
  EXPECT_EQ(c.models_loaded, c.models_unloaded);
}

TEST_F(NeuronBackendTest, InjectedExecuteFailureFailsOnlyThatStep) {
  const auto ref = testing::LoadJson(testing::SharedPath("models/aidreams260K/reference.json"));
  auto b = Create();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto engine = MakeEngine(**b);
  // The step's first execution fails with NaN output (1003): its requests fail.
  const int64_t before = Counters().executes;
  ::setenv("FAKE_NRT_FAIL", ("nrt_execute:1003:" + std::to_string(before + 1)).c_str(), 1);
  std::vector<bool> failed;
  RunPrompts(*engine, ref, 8, &failed);
  ::unsetenv("FAKE_NRT_FAIL");
  const int n_failed = static_cast<int>(std::count(failed.begin(), failed.end(), true));
  EXPECT_GE(n_failed, 1);  // the first step holds the prompts that fit its 64-token budget
  EXPECT_LT(n_failed, static_cast<int>(failed.size()));  // the others still succeed
  auto* nb = dynamic_cast<neuron::NeuronBackend*>(b->get());
  EXPECT_TRUE(nb->healthy());
  RunPrompts(*engine, ref, 8, &failed);
  for (bool f : failed) EXPECT_FALSE(f);
  // A fatal code (timeout) marks the backend unhealthy.
  ::setenv("FAKE_NRT_FAIL", "nrt_execute:5", 1);
  RunPrompts(*engine, ref, 2, &failed);
  ::unsetenv("FAKE_NRT_FAIL");
  EXPECT_FALSE(nb->healthy());
  engine.reset();
  b->reset();
  EXPECT_EQ(Counters().leaked_at_last_close, 0);
}

// Multi-token decode (speculative verification) against the CPU backend run on the same batches.
class MultiTokenDecodeTest : public NeuronBackendTest {
 protected:
  // One sequence of the test: its prompt (prefilled first), then `query_len` more tokens as
  // one decode with num_logits = query_len (its last token and query_len - 1 drafts).
  struct Seq {
    int32_t prompt_len, query_len;
    std::vector<int32_t> tokens, table;
  };

  void SetUp() override {
    NeuronBackendTest::SetUp();
    // Decode programs of 1, 2 and 4 tokens per sequence (none of 6: such a query is split).
    fa_.buckets = {{"decode_b1", true, 1, 8},       {"decode_b4", true, 4, 8},
                   {"decode_t2_b4", true, 4, 8, 2}, {"decode_t4_b2", true, 2, 8, 4},
                   {"prefill_t16", false, 16, 8},   {"prefill_t64", false, 64, 8}};
    KvCacheConfig kv;
    kv.block_size = fa_.block_size;
    kv.num_blocks = fa_.num_blocks;
    kv.dtype = KvDtype::kF32;
    auto cpu = cpu::CpuBackend::Create(model_->config, model_->weights, kv, StepLimits{64, 8}, {});
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    cpu_ = std::move(cpu).value();
  }

  // Sequence i owns blocks [4 i, 4 i + 4); its tokens are a fixed pseudo-random walk.
  std::vector<Seq> MakeSeqs(const std::vector<std::pair<int32_t, int32_t>>& lens) const {
    std::vector<Seq> seqs;
    for (size_t i = 0; i < lens.size(); ++i) {
      Seq s{lens[i].first, lens[i].second, {}, {}};
      for (int32_t t = 0; t < s.prompt_len + s.query_len; ++t) {
        s.tokens.push_back(
            static_cast<int32_t>((i * 131 + t * 37 + 5) % model_->config.vocab_size));
      }
      for (int32_t b = 0; b < 4; ++b) s.table.push_back(static_cast<int32_t>(4 * i) + b);
      seqs.push_back(std::move(s));
    }
    return seqs;
  }

  // The StepBatch of every sequence's prompt (prefill) or of its decode tokens, run on `b`.
  Result<std::vector<float>> Run(Backend& b, const std::vector<Seq>& seqs, bool decode) {
    std::vector<int32_t> ids, slots;
    std::vector<StepSequence> ss;
    size_t rows = 0;
    for (const Seq& q : seqs) {
      const int32_t from = decode ? q.prompt_len : 0, n = decode ? q.query_len : q.prompt_len;
      ss.push_back({static_cast<int32_t>(ids.size()), n, from, q.table, decode, decode ? n : 1});
      for (int32_t pos = from; pos < from + n; ++pos) {
        ids.push_back(q.tokens[pos]);
        slots.push_back(q.table[pos / fa_.block_size] * fa_.block_size + pos % fa_.block_size);
      }
      rows += static_cast<size_t>(ss.back().num_logits);
    }
    std::vector<float> logits(rows * model_->config.vocab_size);
    PAGODA_RETURN_IF_ERROR(b.Execute(StepBatch{ids, slots, ss, {}}, logits));
    return logits;
  }

  std::unique_ptr<cpu::CpuBackend> cpu_;
};

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

// The same decode StepBatch -- sequences of 1, 3, 2, 6 and 1 new tokens -- through the Neuron
// backend (buckets t1 / t2 / t4, padded) and the CPU backend gives the same logits, every row.
TEST_F(MultiTokenDecodeTest, LogitsMatchTheCpuBackend) {
  auto b = Create();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto* nb = dynamic_cast<neuron::NeuronBackend*>(b->get());
  EXPECT_TRUE(nb->capabilities().multi_token_logits);
  const auto seqs = MakeSeqs({{5, 1}, {17, 3}, {20, 2}, {9, 6}, {12, 1}});
  auto want = Run(*cpu_, seqs, false);
  auto got = Run(**b, seqs, false);
  ASSERT_TRUE(want.ok() && got.ok()) << want.status().ToString() << got.status().ToString();
  EXPECT_LE(MaxAbsDiff(*got, *want), 1e-4f);
  const int64_t before = nb->num_executions();
  want = Run(*cpu_, seqs, true);
  got = Run(**b, seqs, true);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), size_t{13} * model_->config.vocab_size);
  EXPECT_LE(MaxAbsDiff(*got, *want), 1e-4f);
  // {q1, q3} on decode_t4_b2; {q2} on decode_t2_b4 (t4_b2 cannot take a third sequence); q6 in
  // two executions of t4 (4 + 2 tokens); {q1} on decode_b1.
  EXPECT_EQ(nb->num_executions() - before, 5);
  // The KV the verification wrote is the CPU backend's: a further decode agrees too.
  auto next = seqs;
  for (auto& q : next) q.prompt_len += q.query_len, q.query_len = 1, q.tokens.push_back(7);
  want = Run(*cpu_, next, true);
  got = Run(**b, next, true);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_LE(MaxAbsDiff(*got, *want), 1e-4f);
  // Prefill programs return the last token's logits only.
  std::vector<StepSequence> one = {{0, 2, 0, seqs[0].table, false, 2}};
  std::vector<int32_t> ids = {1, 2}, slots = {0, 1};
  std::vector<float> logits(2 * model_->config.vocab_size);
  EXPECT_EQ((*b)->Execute(StepBatch{ids, slots, one, {}}, logits).code(),
            StatusCode::kInvalidArgument);
}

// Greedy generation with n-gram speculation on multi-token programs gives the tokens it gives
// without speculation; without a multi-token program the engine refuses speculation.
TEST_F(MultiTokenDecodeTest, NgramSpeculationKeepsGreedyTokens) {
  const auto ref = testing::LoadJson(testing::SharedPath("models/aidreams260K/reference.json"));
  auto b = Create();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  std::vector<bool> failed;
  const auto plain = RunPrompts(*MakeEngine(**b), ref, 40, &failed);
  for (int32_t k : {3, 5}) {  // 5: a verification of 6 tokens is split over t4 executions
    EngineConfig ec;
    ec.scheduler.max_num_seqs = 8;
    ec.scheduler.max_num_batched_tokens = 64;
    ec.speculative.method = SpeculativeMethod::kNgram;
    ec.speculative.num_tokens = k;
    ec.speculative.ngram_min = 1;
    ec.speculative.disable_by_batch_size = 0;  // verify batches of several sequences
    auto engine = Engine::Create(*model_->tokenizer, **b, ec);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    const auto got = RunPrompts(**engine, ref, 40, &failed);
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_FALSE(failed[i]) << "k " << k << " prompt " << i;
      EXPECT_EQ(got[i], plain[i]) << "k " << k << " prompt " << i;
    }
    const SpeculativeStats& st = (*engine)->stats().speculative;
    EXPECT_GT(st.num_drafts, 0) << k;
    EXPECT_GT(st.num_accepted_tokens, 0) << k;
  }
  b->reset();
  fa_.buckets = {{"decode_b4", true, 4, 8}, {"prefill_t64", false, 64, 8}};
  b = Create();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_FALSE((*b)->capabilities().multi_token_logits);
  EngineConfig ec;
  ec.scheduler.max_num_seqs = 8;
  ec.scheduler.max_num_batched_tokens = 64;
  ec.speculative.method = SpeculativeMethod::kNgram;
  auto engine = Engine::Create(*model_->tokenizer, **b, ec);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("speculative.method"), std::string::npos)
      << engine.status().ToString();
}

// The checks the CPU backend makes (kernels/step_batch_check.h), sequence and token counts
// included: every malformed batch is refused before anything reaches the runtime.
TEST_F(NeuronBackendTest, MalformedBatchesAreRejected) {
  auto b = Create();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  Backend& backend = **b;
  const int32_t vocab = backend.vocab_size();
  const auto cases = testing::MalformedBatches(backend.capabilities(), vocab, 6);
  ASSERT_GE(cases.size(), 10u);
  const int64_t executes = Counters().executes;
  for (const auto& c : cases) {
    std::vector<float> logits(c.logit_rows * vocab);
    const Status st = backend.Execute(c.batch(), logits);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.name << ": " << st.ToString();
    EXPECT_NE(st.message().find(c.field), std::string::npos) << c.name << ": " << st.ToString();
  }
  EXPECT_EQ(Counters().executes, executes);
  EXPECT_TRUE(backend.healthy());
  const auto valid = testing::ValidPrefill(6, backend.capabilities().block_size);
  std::vector<float> logits(vocab);
  EXPECT_TRUE(backend.Execute(valid.batch(), logits).ok());
}

}  // namespace
}  // namespace pagoda
