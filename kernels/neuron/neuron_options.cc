#include "kernels/neuron/neuron_options.h"

#include <algorithm>

namespace pagoda {

std::string ProgramIdError(std::span<const std::string> ids, size_t i, const std::string& key) {
  if (ids[i].empty()) return key + ": expected a program id (a non-empty string), got \"\"";
  if (std::find(ids.begin(), ids.begin() + i, ids[i]) != ids.begin() + i) {
    return key + ": duplicate program id \"" + ids[i] + "\"";
  }
  return "";
}

Status ValidateNeuronOptions(const NeuronOptions& o) {
  PAGODA_RETURN_IF_ERROR(
      CheckRange("neuron.logical_nc_config", o.logical_nc_config, kNeuronLogicalNcConfigRange));
  PAGODA_RETURN_IF_ERROR(CheckRange("neuron.vnc", o.vnc, kNeuronVncRange));
  PAGODA_RETURN_IF_ERROR(
      CheckRange("neuron.exec_timeout_s", o.exec_timeout_s, kNeuronExecTimeoutRange));
  const auto& levels = kNeuronRuntimeLogLevels;
  if (std::find(std::begin(levels), std::end(levels), o.runtime_log_level) == std::end(levels)) {
    return InvalidArgument("neuron.runtime_log_level: expected " + DescribeChoices(levels) +
                           ", got \"" + o.runtime_log_level + "\"");
  }
  const std::vector<std::string>& ids = o.buckets_enable;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string error = ProgramIdError(ids, i, "neuron.buckets.enable[" + std::to_string(i) + "]");
    if (!error.empty()) return InvalidArgument(std::move(error));
  }
  return Status::Ok();
}

}  // namespace pagoda
