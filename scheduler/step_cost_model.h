// StepCostModel: the engine's measured cost of a step, which the scheduler's step-time budget
// (SchedulerConfig::step_time_budget_percent, Sarathi-Serve's stall-free batching) uses to turn
// "this step may take at most X seconds" into a number of prefill tokens.
//
// The model is linear in the step's tokens and the context they attend to (StepShape):
//   seconds ~= c0 + c1 * (decode_tokens + prefill_tokens) + c2 * attended / 4096
// c0 is the fixed cost of a step (on the CPU the weight reads), c1 a token's matmuls (decode and
// prompt tokens run the same ones; a decode row's LM head and sampling are a few % more, folded
// in), c2 attention. Decode and prompt tokens share c1 on purpose: the scheduler asks for the
// time of the step's decodes alone, a shape it may not have run for a while (while prompts wait
// every step carries some), and one token slope fitted on mixed and pure steps interpolates it
// where separate slopes could not be told apart from the fixed cost.
// The fit: least squares weighted by 1 / seconds^2 (relative error, so a 5 s prefill step and a
// 0.3 s decode step count alike), refitted twice with Huber weights (residuals beyond 3 median
// absolute deviations count linearly: a step slowed by a busy neighbour does not drag the fit),
// coefficients kept >= 0 (a feature whose slope comes out negative is dropped from the fit), and
// a small ridge on c1 and c2 so that, while the token count does not vary, the cost goes to c0.
// Samples: the last kWindow steps without prefill and, separately, the last kWindow steps with
// prefill, so a long stretch of pure decode does not forget what prompt tokens cost.
// Until kMinSamples steps are seen it predicts nothing.
// Not thread-safe (the engine thread observes, its scheduler predicts).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>

namespace pagoda {

// What a step computes, as the cost model sees it.
struct StepShape {
  int32_t decode_tokens = 0;   // decoding sequences' tokens (1 + speculative tokens each)
  int32_t prefill_tokens = 0;  // prompt-chunk tokens
  int64_t attended = 0;        // sum over the step's tokens of the positions each attends to
};

// The positions attended by `num_new` tokens that follow `num_computed` cached ones:
// sum_{i=1..num_new} (num_computed + i).
int64_t AttendedPositions(int32_t num_computed, int32_t num_new);

// A predictor of step time; the scheduler's view of the engine's cost model (tests inject one).
class StepCostEstimator {
 public:
  virtual ~StepCostEstimator() = default;
  // Predicted seconds of a step of this shape; nullopt while the estimator knows nothing.
  virtual std::optional<double> PredictSeconds(const StepShape& shape) const = 0;
};

class StepCostModel : public StepCostEstimator {
 public:
  static constexpr int32_t kWindow = 64;     // steps of each kind (with / without prefill)
  static constexpr int32_t kMinSamples = 4;  // steps seen before the first prediction
  static constexpr double kAttendedUnit = 4096.0;

  // Adds a measured step (seconds <= 0 or not finite: ignored) and refits.
  void Observe(const StepShape& shape, double seconds);
  std::optional<double> PredictSeconds(const StepShape& shape) const override;
  int32_t num_samples() const {
    return static_cast<int32_t>(decode_only_.size() + with_prefill_.size());
  }
  // c0..c2 of the header comment (zeros before the first fit).
  const std::array<double, 3>& coefficients() const { return coef_; }

 private:
  struct Sample {
    std::array<double, 3> x;
    double seconds;
  };
  void Refit();

  std::deque<Sample> decode_only_, with_prefill_;
  std::array<double, 3> coef_{};
};

}  // namespace pagoda
