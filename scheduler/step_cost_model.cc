#include "scheduler/step_cost_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pagoda {

namespace {

constexpr int kN = 3;
using Vec = std::array<double, kN>;
using Mat = std::array<Vec, kN>;

constexpr double kRidge = 1e-4;  // on c1, c2: relative to the feature's weighted sum of squares
constexpr double kInterceptRidge = 1e-9;  // on c0: only keeps the system definite
constexpr double kHuberMads = 3.0;        // residuals beyond this many MADs count linearly
constexpr double kMinMad = 0.01;          // relative residual scale floor (1%)
constexpr int kReweightPasses = 2;

Vec Features(const StepShape& s) {
  return {1.0, static_cast<double>(s.decode_tokens) + s.prefill_tokens,
          static_cast<double>(s.attended) / StepCostModel::kAttendedUnit};
}

double Dot(const Vec& a, const Vec& b) {
  double sum = 0;
  for (int i = 0; i < kN; ++i) sum += a[i] * b[i];
  return sum;
}

// Solves (M + ridge) c = b by Cholesky over the active features (the others get 0). M is a
// weighted Gram matrix (symmetric, PSD); the ridge makes it definite.
Vec SolveRidge(Mat m, Vec b, const std::array<bool, kN>& active) {
  const double scale = m[0][0] > 0 ? m[0][0] : 1.0;
  for (int i = 0; i < kN; ++i) {
    if (!active[i]) {
      for (int j = 0; j < kN; ++j) m[i][j] = m[j][i] = 0;
      m[i][i] = 1;
      b[i] = 0;
      continue;
    }
    const double base = m[i][i] > 0 ? m[i][i] : scale;
    m[i][i] += (i == 0 ? kInterceptRidge : kRidge) * base;
  }
  Mat l{};
  for (int i = 0; i < kN; ++i) {
    for (int j = 0; j <= i; ++j) {
      double sum = m[i][j];
      for (int k = 0; k < j; ++k) sum -= l[i][k] * l[j][k];
      l[i][j] = i == j ? std::sqrt(std::max(sum, 1e-300)) : sum / l[j][j];
    }
  }
  Vec y{}, c{};
  for (int i = 0; i < kN; ++i) {
    double sum = b[i];
    for (int k = 0; k < i; ++k) sum -= l[i][k] * y[k];
    y[i] = sum / l[i][i];
  }
  for (int i = kN - 1; i >= 0; --i) {
    double sum = y[i];
    for (int k = i + 1; k < kN; ++k) sum -= l[k][i] * c[k];
    c[i] = sum / l[i][i];
  }
  return c;
}

// The non-negative fit: drops the most negative coefficient's feature until none is negative.
Vec SolveNonNegative(const Mat& m, const Vec& b) {
  std::array<bool, kN> active;
  active.fill(true);
  for (;;) {
    const Vec c = SolveRidge(m, b, active);
    const auto worst = std::min_element(c.begin(), c.end());
    if (*worst >= 0) return c;
    active[static_cast<size_t>(worst - c.begin())] = false;
  }
}

double Median(std::vector<double> v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace

int64_t AttendedPositions(int32_t num_computed, int32_t num_new) {
  const int64_t n = num_new;
  return n * num_computed + n * (n + 1) / 2;
}

void StepCostModel::Observe(const StepShape& shape, double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0) return;
  std::deque<Sample>& window = shape.prefill_tokens > 0 ? with_prefill_ : decode_only_;
  window.push_back({Features(shape), seconds});
  if (static_cast<int32_t>(window.size()) > kWindow) window.pop_front();
  Refit();
}

// Weighted least squares with weights 1 / y^2 (relative error), then Huber reweighting of the
// relative residuals.
void StepCostModel::Refit() {
  std::vector<const Sample*> samples;
  for (const Sample& s : decode_only_) samples.push_back(&s);
  for (const Sample& s : with_prefill_) samples.push_back(&s);
  std::vector<double> huber(samples.size(), 1.0);
  for (int pass = 0; pass <= kReweightPasses; ++pass) {
    Mat m{};
    Vec b{};
    for (size_t s = 0; s < samples.size(); ++s) {
      const Sample& smp = *samples[s];
      const double w = huber[s] / (smp.seconds * smp.seconds);
      for (int i = 0; i < kN; ++i) {
        b[i] += w * smp.x[i] * smp.seconds;
        for (int j = 0; j < kN; ++j) m[i][j] += w * smp.x[i] * smp.x[j];
      }
    }
    coef_ = SolveNonNegative(m, b);
    if (pass == kReweightPasses) break;
    std::vector<double> rel(samples.size());
    for (size_t s = 0; s < samples.size(); ++s) {
      rel[s] = std::abs(samples[s]->seconds - Dot(coef_, samples[s]->x)) / samples[s]->seconds;
    }
    const double k = kHuberMads * std::max(Median(rel), kMinMad);
    for (size_t s = 0; s < samples.size(); ++s) huber[s] = rel[s] > k ? k / rel[s] : 1.0;
  }
}

std::optional<double> StepCostModel::PredictSeconds(const StepShape& shape) const {
  if (num_samples() < kMinSamples) return std::nullopt;
  return std::max(0.0, Dot(coef_, Features(shape)));
}

}  // namespace pagoda
