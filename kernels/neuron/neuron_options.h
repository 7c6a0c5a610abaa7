// NeuronOptions: the `neuron:` section of the YAML config (server/config.h), plain data.
// Header-only so the config module can hold it without linking the backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace pagoda
