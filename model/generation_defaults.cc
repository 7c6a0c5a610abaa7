#include "model/generation_defaults.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace pagoda {

void GenerationDefaults::AddStopToken(int32_t id) {
  if (id >= 0 &&
      std::find(stop_token_ids.begin(), stop_token_ids.end(), id) == stop_token_ids.end()) {
    stop_token_ids.push_back(id);
  }
}

namespace {

// A number in [lo, hi] at `key`, or unset when absent / null.
Status ReadNumber(const nlohmann::json& j, const char* key, const std::string& file, double lo,
                  double hi, std::optional<double>* out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number() || !(it->get<double>() >= lo && it->get<double>() <= hi)) {
    return InvalidArgument(file + ": " + key + ": " + it->dump(-1).substr(0, 40) +
                           " (expected a number in " + nlohmann::json(lo).dump() + ".." +
                           nlohmann::json(hi).dump() + ")");
  }
  *out = it->get<double>();
  return Status::Ok();
}

}  // namespace

Status ReadSamplingDefaults(const nlohmann::json& j, const std::string& file,
                            GenerationDefaults* d) {
  if (!j.is_object()) return Status::Ok();
  std::optional<double> v;
  PAGODA_RETURN_IF_ERROR(ReadNumber(j, "temperature", file, 0.0, 1e6, &v));
  if (v) d->temperature = static_cast<float>(*v);
  v.reset();
  PAGODA_RETURN_IF_ERROR(ReadNumber(j, "top_p", file, 0.0, 1.0, &v));
  if (v) d->top_p = static_cast<float>(*v);
  v.reset();
  PAGODA_RETURN_IF_ERROR(ReadNumber(j, "repetition_penalty", file, 1e-6, 1e6, &v));
  if (v) d->repetition_penalty = static_cast<float>(*v);
  v.reset();
  PAGODA_RETURN_IF_ERROR(ReadNumber(j, "top_k", file, -1.0, 1 << 30, &v));
  if (v) {
    if (*v != static_cast<int32_t>(*v)) {
      return InvalidArgument(file + ": top_k: " + std::to_string(*v) + " (expected an integer)");
    }
    d->top_k = *v < 0 ? 0 : static_cast<int32_t>(*v);  // -1: off, as 0 is
  }
  return Status::Ok();
}

}  // namespace pagoda
