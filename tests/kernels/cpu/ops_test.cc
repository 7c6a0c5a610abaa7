// The elementwise ops of kernels/cpu/ops.h against double-precision formulas.
#include "kernels/cpu/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace pagoda::cpu {
namespace {

// SwiGlu: gate = silu(gate) * up within a few ulp over the whole float range the FFN sees,
// including the ends where exp over- or underflows and NaN.
TEST(SwiGluTest, MatchesTheDoubleFormula) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> wide(-120.0f, 120.0f), narrow(-8.0f, 8.0f);
  std::vector<float> gate, up;
  for (int i = 0; i < 4000; ++i) {
    gate.push_back(i % 2 == 0 ? wide(rng) : narrow(rng));
    up.push_back(narrow(rng));
  }
  for (float g : {0.0f, -0.0f, 87.0f, -87.0f, 88.0f, -88.0f, 88.5f, -88.5f, 1e30f, -1e30f}) {
    gate.push_back(g);
    up.push_back(1.5f);
  }
  std::vector<float> out = gate;
  SwiGlu(out.data(), up.data(), static_cast<int64_t>(out.size()));
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    const double want = g / (1.0 + std::exp(-g)) * up[i];
    EXPECT_NEAR(out[i], want, 4e-7 * std::fabs(want) + 1e-30) << "gate " << gate[i];
  }
  std::vector<float> nan_gate = {std::numeric_limits<float>::quiet_NaN()}, one = {1.0f};
  SwiGlu(nan_gate.data(), one.data(), 1);
  EXPECT_TRUE(std::isnan(nan_gate[0]));
}

}  // namespace
}  // namespace pagoda::cpu
