#include "kernels/neuron/neuron_env.h"

#include <cstdlib>

namespace pagoda::neuron {

std::vector<EnvSetting> DesiredEnv(const NeuronOptions& o) {
  std::vector<EnvSetting> env;
  if (!o.visible_cores.empty()) {
    env.push_back({"NEURON_RT_VISIBLE_CORES", o.visible_cores, "neuron.visible_cores"});
  }
  env.push_back({"NEURON_LOGICAL_NC_CONFIG", std::to_string(o.logical_nc_config),
                 "neuron.logical_nc_config"});
  if (o.exec_timeout_s > 0) {
    env.push_back(
        {"NEURON_RT_EXEC_TIMEOUT", std::to_string(o.exec_timeout_s), "neuron.exec_timeout_s"});
  }
  if (!o.runtime_log_level.empty()) {
    env.push_back({"NEURON_RT_LOG_LEVEL", o.runtime_log_level, "neuron.runtime_log_level"});
  }
  return env;
}

Status CheckEnv(const std::vector<EnvSetting>& desired,
                const std::function<const char*(const char*)>& getenv_fn) {
  for (const EnvSetting& e : desired) {
    const char* current = getenv_fn(e.name.c_str());
    if (current != nullptr && e.value != current) {
      return InvalidArgument("neuron backend: environment " + e.name + "=\"" + current +
                             "\" conflicts with " + e.key + " \"" + e.value +
                             "\" (unset the variable or make the two equal)");
    }
  }
  return Status::Ok();
}

Status ExportEnv(const NeuronOptions& options) {
  const std::vector<EnvSetting> desired = DesiredEnv(options);
  PAGODA_RETURN_IF_ERROR(CheckEnv(desired, [](const char* n) { return std::getenv(n); }));
  for (const EnvSetting& e : desired) ::setenv(e.name.c_str(), e.value.c_str(), 1);
  return Status::Ok();
}

}  // namespace pagoda::neuron
