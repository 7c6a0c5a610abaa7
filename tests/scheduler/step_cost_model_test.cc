// StepCostModel tests on synthetic step costs: no prediction without data, the fit of a known
// linear cost, robustness to slowed steps, following the host, pure-decode stretches, no
// negative slopes.
#include "scheduler/step_cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace pagoda {
namespace {

// The true cost the tests fit: a fixed part, per token, attention.
double TrueSeconds(const StepShape& s, double scale = 1.0) {
  return scale * (0.030 + 0.0045 * (s.decode_tokens + s.prefill_tokens) +
                  0.002 * static_cast<double>(s.attended) / StepCostModel::kAttendedUnit);
}

// A deterministic mix of step shapes: pure decodes, decodes with chunks, pure prefills.
StepShape ShapeNumber(uint32_t i) {
  uint32_t x = i * 2654435761u + 12345u;
  const auto next = [&x](uint32_t mod) {
    x = x * 1664525u + 1013904223u;
    return static_cast<int32_t>((x >> 8) % mod);
  };
  StepShape s;
  const int32_t kind = next(3);
  if (kind != 2) {
    s.decode_tokens = 1 + next(16);
    s.attended = s.decode_tokens * (64 + next(512));
  }
  if (kind != 0) {
    const int32_t computed = next(256);
    s.prefill_tokens = 1 + next(kind == 2 ? 2048 : 128);
    s.attended += AttendedPositions(computed, s.prefill_tokens);
  }
  return s;
}

void ExpectNear(const StepCostModel& m, const StepShape& s, double want, double rel) {
  const std::optional<double> got = m.PredictSeconds(s);
  ASSERT_TRUE(got.has_value());
  EXPECT_NEAR(*got, want, rel * want) << "decode " << s.decode_tokens << " prefill "
                                      << s.prefill_tokens << " attended " << s.attended;
}

TEST(AttendedPositions, SumsTheContextOfEachNewToken) {
  EXPECT_EQ(AttendedPositions(0, 0), 0);
  EXPECT_EQ(AttendedPositions(0, 1), 1);
  EXPECT_EQ(AttendedPositions(10, 1), 11);            // a decode after 10 cached tokens
  EXPECT_EQ(AttendedPositions(0, 4), 1 + 2 + 3 + 4);  // a first chunk
  EXPECT_EQ(AttendedPositions(4, 3), 5 + 6 + 7);
  EXPECT_EQ(AttendedPositions(1 << 20, 1 << 20),
            (int64_t{1} << 40) + (int64_t{1} << 39) + (int64_t{1} << 19));  // no overflow
}

TEST(StepCostModel, PredictsNothingWithoutEnoughData) {
  StepCostModel m;
  const StepShape s{16, 0, 2000};
  EXPECT_FALSE(m.PredictSeconds(s).has_value());
  for (int32_t i = 0; i + 1 < StepCostModel::kMinSamples; ++i) m.Observe(s, 0.1);
  EXPECT_FALSE(m.PredictSeconds(s).has_value());
  // Unmeasurable samples are not data.
  m.Observe(s, 0.0);
  m.Observe(s, -1.0);
  m.Observe(s, std::numeric_limits<double>::quiet_NaN());
  m.Observe(s, std::numeric_limits<double>::infinity());
  EXPECT_EQ(m.num_samples(), StepCostModel::kMinSamples - 1);
  EXPECT_FALSE(m.PredictSeconds(s).has_value());
  m.Observe(s, 0.1);
  ExpectNear(m, s, 0.1, 1e-3);
}

TEST(StepCostModel, FitsAKnownLinearCost) {
  StepCostModel m;
  for (uint32_t i = 0; i < 200; ++i) m.Observe(ShapeNumber(i), TrueSeconds(ShapeNumber(i)));
  EXPECT_EQ(m.num_samples(), 2 * StepCostModel::kWindow);  // both kinds' windows are full
  EXPECT_NEAR(m.coefficients()[0], 0.030, 0.030 * 0.01);
  EXPECT_NEAR(m.coefficients()[1], 0.0045, 0.0045 * 0.01);
  EXPECT_NEAR(m.coefficients()[2], 0.002, 0.002 * 0.02);
  for (const StepShape s : {StepShape{16, 0, 16 * 200}, StepShape{16, 20, 16 * 200 + 3000},
                            StepShape{0, 2048, AttendedPositions(0, 2048)}, StepShape{1, 0, 5}}) {
    ExpectNear(m, s, TrueSeconds(s), 0.01);
  }
}

TEST(StepCostModel, SlowedStepsDoNotDragTheFit) {
  StepCostModel m;
  for (uint32_t i = 0; i < 300; ++i) {
    const StepShape s = ShapeNumber(i);
    // Every 8th step ran next to a busy neighbour: 3x-6x slower.
    m.Observe(s, TrueSeconds(s, i % 8 == 7 ? 3.0 + (i % 4) : 1.0));
  }
  for (const StepShape s : {StepShape{16, 0, 16 * 200}, StepShape{16, 20, 16 * 200 + 3000},
                            StepShape{0, 2048, AttendedPositions(0, 2048)}}) {
    ExpectNear(m, s, TrueSeconds(s), 0.05);
  }
}

TEST(StepCostModel, FollowsTheHostAfterAWindow) {
  StepCostModel m;
  for (uint32_t i = 0; i < 300; ++i) m.Observe(ShapeNumber(i), TrueSeconds(ShapeNumber(i)));
  // The host became twice as slow (e.g. its other tenant started): once both windows turned
  // over, the fit predicts the new costs.
  for (uint32_t i = 300; i < 300 + 4 * StepCostModel::kWindow; ++i) {
    m.Observe(ShapeNumber(i), TrueSeconds(ShapeNumber(i), 2.0));
  }
  const StepShape s{16, 20, 16 * 200 + 3000};
  ExpectNear(m, s, TrueSeconds(s, 2.0), 0.01);
}

TEST(StepCostModel, ALongPureDecodeStretchKeepsWhatPrefillCosts) {
  StepCostModel m;
  for (uint32_t i = 0; i < 40; ++i) m.Observe(ShapeNumber(i), TrueSeconds(ShapeNumber(i)));
  for (int32_t i = 0; i < 1000; ++i) {
    const StepShape s{16, 0, 16 * (100 + i)};
    m.Observe(s, TrueSeconds(s));
  }
  const StepShape mixed{16, 100, 16 * 1100 + AttendedPositions(0, 100)};
  ExpectNear(m, mixed, TrueSeconds(mixed), 0.02);
}

TEST(StepCostModel, OnlyOneStepSizePutsTheCostInTheFixedPart) {
  // Every step had 16 tokens: the fit cannot tell the fixed cost from the per-token one and
  // keeps the slope near 0 (the first steps of another size teach it).
  StepCostModel m;
  for (int32_t i = 0; i < 50; ++i) m.Observe({16, 0, 0}, 0.1);
  ExpectNear(m, {16, 0, 0}, 0.1, 0.01);
  EXPECT_NEAR(m.coefficients()[0], 0.1, 0.01);
  EXPECT_GE(m.coefficients()[1], 0.0);
}

TEST(StepCostModel, SlopesNeverComeOutNegative) {
  // Larger steps measured faster (noise, a neighbour that went quiet): the fit drops the slope
  // instead of predicting that more tokens cost less.
  StepCostModel m;
  for (int32_t i = 0; i < 20; ++i) {
    m.Observe({16, 0, 0}, 0.3);
    m.Observe({16, 64, 0}, 0.2);
  }
  for (const double c : m.coefficients()) EXPECT_GE(c, 0.0);
  const double small = *m.PredictSeconds({16, 0, 0});
  EXPECT_LE(small, *m.PredictSeconds({16, 64, 0}));
}

}  // namespace
}  // namespace pagoda
