// Loading libnrt with dlopen and resolving the NrtApi table (docs/neuron-backend.md 5.2).
//
// Search order: `explicit_path` alone when it is non-empty; otherwise "libnrt.so.1" (the
// dynamic linker's search) and then /opt/aws/neuron/lib/libnrt.so.1. RTLD_NOW | RTLD_LOCAL.
// The handle is never dlclose'd (libnrt may register atexit handlers).
#pragma once

#include <string>

#include "common/status.h"
#include "kernels/neuron/nrt_api.h"

namespace pagoda::neuron {

struct LoadedNrt {
  NrtApi api;
  std::string path;     // the candidate that loaded
  std::string version;  // "major.minor.patch" from nrt_get_version, or "unknown"
};

// Errors (UNAVAILABLE, the exact multi-line texts of docs/neuron-backend.md 5.2):
//   "neuron backend: cannot load the Neuron runtime library (libnrt.so.1).\n  tried: ..."
//   "neuron backend: PATH lacks required symbol 'NAME' (libnrt VERSION)."
Result<LoadedNrt> LoadNrt(const std::string& explicit_path);

}  // namespace pagoda::neuron
