// Pure unit tests of the Neuron backend's pieces (no runtime library): bucket choice, status
// actions, env precedence, manifest validation, tensor diffs, NEFF header.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "kernels/neuron/bucketing.h"
#include "kernels/neuron/manifest.h"
#include "kernels/neuron/neuron_backend.h"
#include "kernels/neuron/neuron_env.h"
#include "kernels/neuron/nrt_status.h"
#include "runtime/runtime.h"
#include "tests/test_data.h"

namespace pagoda::neuron {
namespace {

ManifestProgram Decode(const std::string& id, int seqs, int ctx, int tokens_per_seq = 1) {
  ManifestProgram p;
  p.id = id;
  p.phase = "decode";
  p.max_seqs = seqs;
  p.max_ctx_blocks = ctx;
  p.tokens_per_seq = tokens_per_seq;
  return p;
}

ManifestProgram Prefill(const std::string& id, int tokens, int ctx) {
  ManifestProgram p = Decode(id, 1, ctx);
  p.phase = "prefill";
  p.max_tokens = tokens;
  return p;
}

TEST(BucketingTest, PicksTheSmallestFittingProgram) {
  const std::vector<ManifestProgram> ps = {Decode("b8c64", 8, 64), Decode("b2c8", 2, 8),
                                           Decode("b2c64", 2, 64), Prefill("t64", 64, 8),
                                           Prefill("t16", 16, 64)};
  EXPECT_EQ(PickDecodeProgram(ps, 1, 1, 4), 1);
  EXPECT_EQ(PickDecodeProgram(ps, 2, 1, 9), 2);
  EXPECT_EQ(PickDecodeProgram(ps, 3, 1, 1), 0);
  EXPECT_EQ(PickDecodeProgram(ps, 9, 1, 1), -1);
  EXPECT_EQ(PickDecodeProgram(ps, 1, 2, 1), -1);  // every decode program takes 1 token
  EXPECT_EQ(PickPrefillProgram(ps, 10, 8), 4);
  EXPECT_EQ(PickPrefillProgram(ps, 20, 8), 3);
  EXPECT_EQ(PickPrefillProgram(ps, 20, 9), -1);
  EXPECT_EQ(MaxContextBlocks(ps), 64);
  EXPECT_EQ(MaxTokensPerSeq(ps, 9), 1);
  EXPECT_EQ(MaxPrefillTokens(ps, 9), 16);
}

// Decode steps whose sequences carry 1 (plain decode) or k + 1 (verification) tokens: the
// smallest tokens_per_seq >= the longest query, then the smallest batch, then the narrowest.
TEST(BucketingTest, MixedQueryLengthsPickTheSmallestTokensPerSeqThatFits) {
  const std::vector<ManifestProgram> ps = {Decode("t1b8", 8, 16),     Decode("t4b2", 2, 16, 4),
                                           Decode("t4b4", 4, 16, 4),  Decode("t8b2", 2, 16, 8),
                                           Decode("t4b2c4", 2, 4, 4), Prefill("p16", 16, 16),
                                           Decode("t8b1", 1, 64, 8)};
  EXPECT_EQ(PickDecodeProgram(ps, 3, 1, 2), 0);   // q 1: single-token programs first
  EXPECT_EQ(PickDecodeProgram(ps, 2, 3, 2), 4);   // q {1, 3}: t4, batch 2, the narrow one
  EXPECT_EQ(PickDecodeProgram(ps, 2, 4, 5), 1);   // too wide for t4b2c4
  EXPECT_EQ(PickDecodeProgram(ps, 3, 4, 2), 2);   // 3 sequences: t4b4
  EXPECT_EQ(PickDecodeProgram(ps, 2, 5, 2), 3);   // q 5: t8
  EXPECT_EQ(PickDecodeProgram(ps, 3, 5, 2), -1);  // no t8 program takes 3 sequences
  EXPECT_EQ(PickDecodeProgram(ps, 1, 6, 17), 6);  // only t8b1 reaches 17 blocks
  EXPECT_EQ(PickDecodeProgram(ps, 1, 9, 1), -1);  // longer than every program: split
  EXPECT_EQ(MaxTokensPerSeq(ps, 1), 8);
  EXPECT_EQ(MaxTokensPerSeq(ps, 16), 8);
  EXPECT_EQ(MaxTokensPerSeq(ps, 65), 0);
  EXPECT_EQ(MaxTokensPerSeq({Decode("t1", 4, 8), Decode("t4", 1, 4, 4)}, 5), 1);
}

TEST(StatusTest, ActionTable) {
  EXPECT_EQ(ActionForStatus(0), NrtAction::kOk);
  EXPECT_EQ(ActionForStatus(7), NrtAction::kRetry);
  for (int c : {1002, 1003, 1006}) EXPECT_EQ(ActionForStatus(c), NrtAction::kFailStep) << c;
  for (int c : {1, 2, 4, 5, 6, 101, 1004, 1005, 1200, 4242}) {
    EXPECT_EQ(ActionForStatus(c), NrtAction::kFatal) << c;
  }
  EXPECT_EQ(NrtStatusName(5), "NRT_TIMEOUT (5)");
  EXPECT_EQ(NrtStatusName(4242), "NRT_STATUS 4242");
}

TEST(EnvTest, ConflictNamesBothValues) {
  NeuronOptions o;
  o.visible_cores = "0";
  auto env = DesiredEnv(o);
  Status s = CheckEnv(env, [](const char* n) -> const char* {
    return std::string(n) == "NEURON_RT_VISIBLE_CORES" ? "1" : nullptr;
  });
  EXPECT_EQ(s.message(),
            "neuron backend: environment NEURON_RT_VISIBLE_CORES=\"1\" conflicts with "
            "neuron.visible_cores \"0\" (unset the variable or make the two equal)");
  EXPECT_EQ(StartupExitCode(BackendStartupError(s)), kExitBadConfig);
  EXPECT_TRUE(CheckEnv(env, [](const char* n) -> const char* {
                return std::string(n) == "NEURON_LOGICAL_NC_CONFIG" ? "2" : nullptr;
              }).ok());
}

constexpr const char* kManifest = R"({
  "format": "pagoda-neuron-manifest/1", "target": "trn2", "lnc": 2,
  "model": {"arch": "llama", "n_layers": 1, "vocab": 8, "n_kv_heads": 2, "head_dim": 4},
  "kv_cache": {"layout": "[2][num_blocks][n_kv_heads][block_size][head_dim]", "num_blocks": 4,
               "block_size": 2, "dtype": "bf16", "tensor_names": {"k": "kv.{layer}.k",
               "v": "kv.{layer}.v"}, "slot_pad": -1, "table_pad": -1},
  "weights": {"mode": "embedded"},
  "programs": [
    {"id": "d2", "phase": "decode", "neff": "d2.neff", "max_seqs": 2, "max_ctx_blocks": 3,
     "io": {"input_ids": "ids", "position_ids": "pos", "slot_mapping": "slots",
            "block_table": "tables", "context_lens": "lens", "logits": "logits"}}]})";

TEST(ManifestTest, ParsesAndDerivesTheContract) {
  auto m = ParseManifest(kManifest, "/a/manifest.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->dir, "/a");
  const auto specs = ExpectedTensors(*m, m->programs[0]);
  ASSERT_EQ(specs.size(), 8u);
  EXPECT_EQ(specs[3].ToString(), "input tables i32[2,3] (24 bytes)");
  EXPECT_EQ(specs[5].ToString(), "output logits f32[2,8] (64 bytes)");
  EXPECT_EQ(specs[6].ToString(), "input kv.0.k bf16[4,2,2,4] (128 bytes)");
  auto actual = specs;
  actual[0].shape = {3};
  actual.pop_back();
  EXPECT_EQ(DiffTensors(specs, actual),
            "  - input ids i32[2] (8 bytes)\n  + input ids i32[3] (12 bytes)\n"
            "  - input kv.0.v bf16[4,2,2,4] (128 bytes)\n  + (absent)\n");
}

TEST(ManifestTest, ErrorsNameTheKey) {
  std::string bad = kManifest;
  bad.replace(bad.find("\"max_seqs\": 2"), 13, "\"max_seqs\": 0");
  EXPECT_EQ(ParseManifest(bad, "m.json").status().message(),
            "neuron backend: manifest m.json: programs[0].max_seqs: must be >= 1");
  auto m = ParseManifest(kManifest, "m.json");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(CheckLnc(*m, 1).message(),
            "neuron backend: LNC mismatch: neuron.logical_nc_config is 1 but the manifest m.json "
            "was compiled for lnc 2 (recompile with -lnc 1, or set neuron.logical_nc_config: 2)");
  ModelConfig c;
  c.n_layers = 1;
  c.vocab_size = 9;
  c.n_kv_heads = 2;
  c.head_dim = 4;
  Status s = CheckManifestAgainstModel(*m, c);
  EXPECT_EQ(s.message(), "neuron backend: manifest m.json: model.vocab is 8 but the model has 9");
  EXPECT_EQ(StartupExitCode(BackendStartupError(s)), kExitBackendArtifacts);
}

std::string WithTokensPerSeq(const std::string& value) {
  std::string m = kManifest;
  m.replace(m.find("\"max_seqs\": 2"), 13, "\"max_seqs\": 2, \"tokens_per_seq\": " + value);
  return m;
}

// A multi-token decode program: per-token tensors and logits are max_seqs x tokens_per_seq long,
// block_table and context_lens stay per sequence.
TEST(ManifestTest, TokensPerSeqShapesTheTokenTensors) {
  auto m = ParseManifest(WithTokensPerSeq("4"), "m.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ManifestProgram& p = m->programs[0];
  EXPECT_EQ(p.tokens_per_seq, 4);
  EXPECT_EQ(p.tokens(), 8);
  EXPECT_EQ(p.logit_rows(), 8);
  const auto specs = ExpectedTensors(*m, p);
  EXPECT_EQ(specs[0].ToString(), "input ids i32[8] (32 bytes)");
  EXPECT_EQ(specs[1].ToString(), "input pos i32[8] (32 bytes)");
  EXPECT_EQ(specs[2].ToString(), "input slots i32[8] (32 bytes)");
  EXPECT_EQ(specs[3].ToString(), "input tables i32[2,3] (24 bytes)");
  EXPECT_EQ(specs[4].ToString(), "input lens i32[2] (8 bytes)");
  EXPECT_EQ(specs[5].ToString(), "output logits f32[8,8] (256 bytes)");
  EXPECT_EQ(ParseManifest(kManifest, "m.json")->programs[0].tokens_per_seq, 1);  // the default
  EXPECT_TRUE(ParseManifest(WithTokensPerSeq("8"), "m.json").ok());
  for (const char* bad : {"0", "9", "-1"}) {
    const Status st = ParseManifest(WithTokensPerSeq(bad), "m.json").status();
    EXPECT_EQ(st.message(),
              "neuron backend: manifest m.json: programs[0].tokens_per_seq: expected 1..8 (the TKG "
              "kernel's limit), got " +
                  std::string(bad));
    EXPECT_EQ(StartupExitCode(BackendStartupError(st)), kExitBackendArtifacts);
  }
  EXPECT_EQ(ParseManifest(WithTokensPerSeq("\"4\""), "m.json").status().message(),
            "neuron backend: manifest m.json: programs[0].tokens_per_seq: wrong type (\"4\")");
  std::string huge = WithTokensPerSeq("8");
  huge.replace(huge.find("\"max_seqs\": 2"), 13, "\"max_seqs\": 1073741824");
  EXPECT_EQ(ParseManifest(huge, "m.json").status().message(),
            "neuron backend: manifest m.json: programs[0].max_seqs: max_seqs x tokens_per_seq "
            "overflows 32 bits");
}

TEST(ManifestTest, InspectShowsTokensPerSeq) {
  testing::TempDir dir;
  std::string text = WithTokensPerSeq("4");
  const std::string prefill =
      R"({"id": "p4", "phase": "prefill", "neff": "p4.neff", "max_tokens": 4,
          "max_ctx_blocks": 3, "io": {"input_ids": "ids", "position_ids": "pos",
          "slot_mapping": "slots", "block_table": "tables", "context_lens": "lens",
          "logits": "logits"}}, )";
  text.insert(text.find("{\"id\": \"d2\""), prefill);
  std::ofstream(dir.File("manifest.json")) << text;
  std::ostringstream out;
  ASSERT_TRUE(InspectNeuronManifest(dir.File("manifest.json"), out).ok());
  EXPECT_NE(out.str().find("speculative verification: up to 3 draft tokens per execution\n"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("  d2: decode max_seqs 2 tokens_per_seq 4 max_ctx_blocks 3"),
            std::string::npos)
      << out.str();
}

TEST(NeffHeaderTest, ReadsNameAndLnc) {
  std::string h(1024, '\0');
  std::memcpy(h.data() + kNeffNameOffset, "pagoda-fake:x", 13);
  const uint32_t lnc = 2;
  std::memcpy(h.data() + kNeffLncOffset, &lnc, 4);
  auto parsed = ParseNeffHeader(h.data(), h.size(), "x.neff");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->name, "pagoda-fake:x");
  EXPECT_EQ(parsed->lnc_size, 2u);
  EXPECT_FALSE(ParseNeffHeader(h.data(), 100, "x.neff").ok());
}

}  // namespace
}  // namespace pagoda::neuron
