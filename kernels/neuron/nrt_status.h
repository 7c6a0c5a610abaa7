// What Pagoda does with each NRT_STATUS (docs/neuron-backend.md 2.2).
#pragma once

#include <string>

#include "kernels/neuron/nrt_api.h"

namespace pagoda::neuron {

enum class NrtAction {
  kOk,
  kRetry,     // transient (queue full): retry the same call after a short backoff
  kFailStep,  // request-level (bad input, NaN, OOB): fail this step's requests, keep serving
  kFatal,     // device/runtime broken, or a Pagoda bug: fail the step and mark unhealthy
};

NrtAction ActionForStatus(NRT_STATUS status);
// "NRT_TIMEOUT (5)"; unknown codes numerically ("NRT_STATUS 4242"). `api` (may be null) supplies
// nrt_get_status_as_str when the library has it.
std::string NrtStatusName(NRT_STATUS status, const NrtApi* api = nullptr);

}  // namespace pagoda::neuron
