// NeuronOptions: the `neuron:` section of the YAML config (server/config.h), plain data, with
// its defaults and ranges declared once here and ValidateNeuronOptions (errors name the key).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/field_check.h"
#include "common/status.h"

namespace pagoda {

struct NeuronOptions {
  std::string runtime_library;             // absolute path; "" = libnrt.so.1, then /opt/aws/...
  std::string artifacts_dir;               // holds the manifest, the NEFFs and the weights
  std::string manifest = "manifest.json";  // relative to artifacts_dir (or absolute)
  std::string visible_cores;               // -> NEURON_RT_VISIBLE_CORES; "" = leave env alone
  int32_t logical_nc_config = 2;           // -> NEURON_LOGICAL_NC_CONFIG; must equal manifest.lnc
  int32_t vnc = 0;                         // logical core for loads/allocations; -1 = runtime picks
  int32_t exec_timeout_s = 30;             // -> NEURON_RT_EXEC_TIMEOUT
  std::string runtime_log_level = "ERROR";  // -> NEURON_RT_LOG_LEVEL
  bool warmup = true;                       // execute every program once before serving
  // neuron.buckets.enable: ids of the manifest programs to load; empty = every program.
  std::vector<std::string> buckets_enable;
  bool operator==(const NeuronOptions&) const = default;
};

inline constexpr IntRange kNeuronLogicalNcConfigRange{1, 2};
inline constexpr IntRange kNeuronVncRange{-1, 1024};
inline constexpr IntRange kNeuronExecTimeoutRange{1, 3600};
inline constexpr std::string_view kNeuronRuntimeLogLevels[] = {"TRACE", "DEBUG", "INFO",
                                                               "WARN",  "ERROR", "FATAL"};

// The error of buckets.enable item `i` given the items before it, "" when it is fine: an empty
// id, or a duplicate of an earlier one. `key` names the item, e.g. "neuron.buckets.enable[2]".
std::string ProgramIdError(std::span<const std::string> ids, size_t i, const std::string& key);

// The ranges above, runtime_log_level among kNeuronRuntimeLogLevels, and buckets.enable holding
// distinct non-empty ids. Errors name the `neuron.` key.
Status ValidateNeuronOptions(const NeuronOptions& options);

}  // namespace pagoda
