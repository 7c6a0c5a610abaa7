// runtime/: BuildRuntime from a RuntimeConfig.
//
// backend cpu never loads the Neuron runtime: after building and running a CPU runtime, the fake
// libnrt (whose loading would write its marker) is not mapped and its marker was never written.
// (neuron.* keys must keep their defaults with backend cpu, so the fake is not named in the
// config; its folder is on LD_LIBRARY_PATH instead (tests/runtime/CMakeLists.txt), so a stray
// LoadNrt would find it.)
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "runtime/runtime.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

TEST(CpuBackendTest, NeverDlopensTheNeuronRuntime) {
  testing::TempDir dir;
  const std::string marker = dir.File("loaded");
  ::setenv("FAKE_NRT_MARKER", marker.c_str(), 1);
  auto model = LoadModel(testing::SharedPath("models/aidreams260K/aidreams260K-f32.gguf"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  RuntimeConfig c;
  c.backend = BackendType::kCpu;
  c.engine.scheduler.max_num_seqs = 4;
  c.engine.scheduler.max_num_batched_tokens = 64;
  auto rt = BuildRuntime(**model, c);
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  Request r;
  r.request_id = "a";
  r.prompt_token_ids = {1, 319};
  r.sampling.temperature = 0;
  r.stopping.max_tokens = 4;
  ASSERT_TRUE(rt->engine->Submit(r).ok());
  ASSERT_TRUE(rt->engine->RunUntilIdle().ok());
  EXPECT_EQ(dlopen(FAKE_NRT_PATH, RTLD_NOW | RTLD_NOLOAD), nullptr);
  EXPECT_EQ(dlopen("libnrt.so.1", RTLD_NOW | RTLD_NOLOAD), nullptr);
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(RuntimeConfigTest, DefaultsAreValidAndEachLayersRuleIsChecked) {
  RuntimeConfig c;
  EXPECT_TRUE(ValidateRuntimeConfig(c).ok());
  c.engine.scheduler.max_num_batched_tokens = 8;
  c.engine.scheduler.max_num_seqs = 16;
  EXPECT_EQ(ValidateRuntimeConfig(c).message(),
            "engine.max_num_batched_tokens: must be >= engine.max_num_seqs (16) so every decode "
            "fits a step");
  c = RuntimeConfig{};
  c.kv_cache.block_size = 24;
  EXPECT_EQ(ValidateRuntimeConfig(c).message(),
            "kv_cache.block_size: expected a power of two in 1..256, got 24");
  c = RuntimeConfig{};
  c.cpu.threads = -1;
  EXPECT_EQ(ValidateRuntimeConfig(c).message(),
            "backend.threads: expected an integer in 0..4096, got -1");
  c = RuntimeConfig{};
  c.cpu.spin_us = -1;
  EXPECT_EQ(ValidateRuntimeConfig(c).message(),
            "backend.spin_us: expected an integer in 0..1000000, got -1");
  c = RuntimeConfig{};
  c.neuron.exec_timeout_s = 0;
  EXPECT_EQ(ValidateRuntimeConfig(c).message(),
            "neuron.exec_timeout_s: expected an integer in 1..3600, got 0");
}

TEST(RuntimeConfigTest, KeysTheSelectedBackendIgnoresAreRejected) {
  RuntimeConfig c;
  c.backend = BackendType::kNeuron;
  EXPECT_TRUE(ValidateRuntimeConfig(c).ok());
  c.kv_cache.block_size = 32;
  const Status kv = ValidateRuntimeConfig(c);
  EXPECT_EQ(kv.message().rfind("kv_cache.block_size: not used with backend.type neuron", 0), 0u)
      << kv.message();
  c = RuntimeConfig{};
  c.backend = BackendType::kNeuron;
  c.cpu.threads = 2;
  EXPECT_EQ(ValidateRuntimeConfig(c).message().rfind("backend.threads: not used with", 0), 0u);
  c = RuntimeConfig{};
  c.backend = BackendType::kNeuron;
  c.cpu.pack_weights = false;
  EXPECT_EQ(ValidateRuntimeConfig(c).message().rfind("backend.pack_weights: not used with", 0), 0u);
  c = RuntimeConfig{};
  c.backend = BackendType::kNeuron;
  c.cpu.spin_us = 0;
  EXPECT_EQ(ValidateRuntimeConfig(c).message().rfind("backend.spin_us: not used with", 0), 0u);
  c = RuntimeConfig{};
  c.neuron.artifacts_dir = "/artifacts";
  EXPECT_EQ(ValidateRuntimeConfig(c).message().rfind("neuron: the neuron.* keys are used only", 0),
            0u);
}

TEST(RuntimeStartup, ExitCodesFollowTheBackendCodeContract) {
  EXPECT_EQ(BackendStartupError(Status(StatusCode::kUnavailable, "x")),
            StartupError::kBackendUnavailable);
  EXPECT_EQ(BackendStartupError(FailedPrecondition("x")), StartupError::kBackendArtifacts);
  EXPECT_EQ(BackendStartupError(InvalidArgument("x")), StartupError::kBadConfig);
  EXPECT_EQ(BackendStartupError(ResourceExhausted("x")), StartupError::kFailed);
  EXPECT_EQ(StartupExitCode(StartupError::kFailed), 1);
  EXPECT_EQ(StartupExitCode(StartupError::kBadConfig), 2);
  EXPECT_EQ(StartupExitCode(StartupError::kBackendUnavailable), 3);
  EXPECT_EQ(StartupExitCode(StartupError::kBackendArtifacts), 4);
}

TEST(RuntimeStartup, AnInvalidConfigIsABadConfigFailure) {
  auto model = LoadModel(testing::SharedPath("models/aidreams260K/aidreams260K-f32.gguf"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  RuntimeConfig c;
  c.kv_cache.block_size = 3;
  StartupError error = StartupError::kFailed;
  auto rt = BuildRuntime(**model, c, &error);
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(error, StartupError::kBadConfig);
  EXPECT_EQ(rt.status().message(), "kv_cache.block_size: expected a power of two in 1..256, got 3");
}

}  // namespace
}  // namespace pagoda
