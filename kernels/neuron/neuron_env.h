// The NEURON_RT_* environment the runtime reads at nrt_init (docs/neuron-backend.md 5.3).
// Precedence: a variable already set in the environment that differs from the config is an
// error naming both values -- Pagoda never silently overrides an operator's environment.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kernels/neuron/neuron_options.h"

namespace pagoda::neuron {

// (variable, value, config key) the options ask for.
struct EnvSetting {
  std::string name, value, key;
};
std::vector<EnvSetting> DesiredEnv(const NeuronOptions& options);

// `getenv` returns the current value or nullptr. INVALID_ARGUMENT on the first conflict:
//   neuron backend: environment NEURON_RT_VISIBLE_CORES="1" conflicts with
//   neuron.visible_cores "0" (unset the variable or make the two equal)
Status CheckEnv(const std::vector<EnvSetting>& desired,
                const std::function<const char*(const char*)>& getenv_fn);

// Checks, then exports every desired variable (setenv) -- call before nrt_init.
Status ExportEnv(const NeuronOptions& options);

}  // namespace pagoda::neuron
