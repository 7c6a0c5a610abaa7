// Shared state of the fake libnrt's two translation units (test-only).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/neuron/manifest.h"
#include "kernels/neuron/nrt_api.h"
#include "model/model.h"

namespace fake_nrt {
struct TorchProgram;  // fake_nrt_torch.cc (the TorchScript mode)
}  // namespace fake_nrt

struct nrt_tensor {
  std::vector<std::byte> data;
  int vnc = 0;
  std::string name;
};

struct nrt_model {
  std::string id;  // the NEFF header name after "pagoda-fake:" (the manifest program id)
  nlohmann::json desc;
  std::vector<pagoda::neuron::TensorSpec> io;
  std::unique_ptr<pagoda::Model> model;
  std::unique_ptr<pagoda::cpu::CpuBackend> cpu;
  std::shared_ptr<fake_nrt::TorchProgram> torch;  // TorchScript mode; null for CPU-model programs
  std::atomic<bool> busy{false};
};

namespace fake_nrt {

using TensorSet = std::map<std::string, nrt_tensor*>;

// NRT_CLOSED / NRT_UNINITIALIZED outside init, else the injected status for this call, else 0.
NRT_STATUS ReadyAndInject(const char* api);
enum class Event { kLoad, kUnload, kExecute };
void Count(Event e);
// Per program: loaded, and one execution with `real_rows` rows whose context_lens > 0 (warm-up
// and other all-padding executions have 0).
void CountProgramLoad(const std::string& id);
void CountProgramExecute(const std::string& id, int real_rows);
bool Strict();

// TorchScript mode (fake_nrt_torch.cc; libnrt builds without libtorch refuse such programs):
// loads the archive after a "pagoda-torchscript:" NEFF header into `m` (its io, desc and torch),
// and executes it on the bound tensors. NRT_INVALID / NRT_EXEC_BAD_INPUT on failure.
inline constexpr const char* kTorchScriptPrefix = "pagoda-torchscript:";
NRT_STATUS LoadTorchScript(const char* archive, size_t size, nrt_model* m);
NRT_STATUS ExecuteTorchScript(nrt_model* m, const TensorSet& in, const TensorSet& out,
                              int* real_rows);

}  // namespace fake_nrt
