// backend cpu never loads the Neuron runtime: after building and running a CPU runtime whose
// neuron.runtime_library names the fake libnrt (so a stray LoadNrt would load it), the fake is
// not mapped and its load marker was never written.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/test_data.h"
#include "runtime/runtime.h"

namespace pagoda {
namespace {

TEST(CpuBackendTest, NeverDlopensTheNeuronRuntime) {
  testing::TempDir dir;
  const std::string marker = dir.File("loaded");
  ::setenv("FAKE_NRT_MARKER", marker.c_str(), 1);
  auto model = LoadModel(testing::SharedPath("models/aidreams260K/aidreams260K-f32.gguf"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  RuntimeOptions o;
  o.backend = "cpu";
  o.neuron.runtime_library = FAKE_NRT_PATH;
  o.scheduler.max_num_seqs = 4;
  o.scheduler.max_num_batched_tokens = 64;
  auto rt = BuildRuntime(**model, o);
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

}  // namespace
}  // namespace pagoda
