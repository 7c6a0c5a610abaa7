#include "kernels/neuron/nrt_loader.h"

#include <dlfcn.h>

#include <vector>

namespace pagoda::neuron {
namespace {

constexpr const char* kDefaultSoname = "libnrt.so.1";
constexpr const char* kDefaultPath = "/opt/aws/neuron/lib/libnrt.so.1";

std::string LoadError(const std::vector<std::pair<std::string, std::string>>& tried) {
  std::string m = "neuron backend: cannot load the Neuron runtime library (libnrt.so.1).\n";
  for (size_t i = 0; i < tried.size(); ++i) {
    m += (i == 0 ? "  tried: " : "         ") + tried[i].first + ": " + tried[i].second + "\n";
  }
  m += "  The Neuron backend needs an Inf2/Trn1/Trn2 instance with the aws-neuronx-dkms driver "
       "and the\n  aws-neuronx-runtime-lib package. Set neuron.runtime_library to its path, or "
       "run with `backend.type: cpu`.";
  return m;
}

template <typename Fn>
void Resolve(void* handle, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
}

std::string Version(const NrtApi& api) {
  if (api.get_version == nullptr) return "unknown";
  nrt_version_t v{};
  if (api.get_version(&v, sizeof(v)) != kNrtSuccess) return "unknown";
  return std::to_string(v.rt_major) + "." + std::to_string(v.rt_minor) + "." +
         std::to_string(v.rt_patch);
}

// Resolves every entry; returns the first missing required symbol's name, or "".
std::string ResolveAll(void* h, NrtApi& a) {
  Resolve(h, "nrt_get_version", a.get_version);
  Resolve(h, "nrt_get_visible_vnc_count", a.get_visible_vnc_count);
  Resolve(h, "nrt_get_vnc_memory_stats", a.get_vnc_memory_stats);
  Resolve(h, "nrt_get_status_as_str", a.get_status_as_str);
  std::string missing;
  auto req = [&](const char* name, auto& fn) {
    Resolve(h, name, fn);
    if (fn == nullptr && missing.empty()) missing = name;
  };
  req("nrt_init", a.init);
  req("nrt_close", a.close);
  req("nrt_load", a.load);
  req("nrt_unload", a.unload);
  req("nrt_allocate_tensor_set", a.allocate_tensor_set);
  req("nrt_destroy_tensor_set", a.destroy_tensor_set);
  req("nrt_add_tensor_to_tensor_set", a.add_tensor_to_tensor_set);
  req("nrt_execute", a.execute);
  req("nrt_tensor_allocate", a.tensor_allocate);
  req("nrt_tensor_free", a.tensor_free);
  req("nrt_tensor_read", a.tensor_read);
  req("nrt_tensor_write", a.tensor_write);
  req("nrt_tensor_memset", a.tensor_memset);
  req("nrt_tensor_copy", a.tensor_copy);
  req("nrt_get_model_tensor_info", a.get_model_tensor_info);
  req("nrt_free_model_tensor_info", a.free_model_tensor_info);
  return missing;
}

}  // namespace

Result<LoadedNrt> LoadNrt(const std::string& explicit_path) {
  std::vector<std::string> candidates;
  if (!explicit_path.empty()) {
    candidates = {explicit_path};
  } else {
    candidates = {kDefaultSoname, kDefaultPath};
  }
  std::vector<std::pair<std::string, std::string>> tried;
  for (const std::string& c : candidates) {
    void* handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      tried.emplace_back(c, err != nullptr ? err : "unknown error");
      continue;
    }
    LoadedNrt out;
    out.path = c;
    const std::string missing = ResolveAll(handle, out.api);
    out.version = Version(out.api);
    if (!missing.empty()) {
      return Status(StatusCode::kUnavailable, "neuron backend: " + c + " lacks required symbol '" +
                                                  missing + "' (libnrt " + out.version + ").");
    }
    return out;
  }
  return Status(StatusCode::kUnavailable, LoadError(tried));
}

}  // namespace pagoda::neuron
