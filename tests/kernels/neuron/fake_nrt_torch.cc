// The fake libnrt's TorchScript mode (docs/neuron-backend.md 6.2): programs written by
// `python3 -m tools.neuron_build --target cpu-reference` are a NEFF header named
// "pagoda-torchscript:<id>" followed by a TorchScript archive whose extra file pagoda_io.json
// lists the program's tensors in argument order. nrt_load loads the archive with libtorch and
// reports those tensors as the program's tensor info; nrt_execute binds the named tensors of
// the input set as the program's arguments without copying (the KV pools are state: the
// program updates them in place, as aliased state on a device), runs forward() and writes its
// output into the bound logits tensor, like a real runtime.
#include <ATen/Parallel.h>
#include <torch/script.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/kernels/neuron/fake_nrt_internal.h"

namespace fake_nrt {

struct TorchProgram {
  torch::jit::script::Module module;
};

namespace {

namespace nn = pagoda::neuron;
using json = nlohmann::json;

c10::ScalarType TorchType(nrt_dtype_t d) {
  switch (d) {
    case NRT_DTYPE_FLOAT32:
      return torch::kFloat32;
    case NRT_DTYPE_BFLOAT16:
      return torch::kBFloat16;
    case NRT_DTYPE_FLOAT16:
      return torch::kFloat16;
    case NRT_DTYPE_INT64:
      return torch::kInt64;
    default:
      return torch::kInt32;
  }
}

// The spec list of pagoda_io.json's "tensors" (argument order, the output last).
std::vector<nn::TensorSpec> SpecsOf(const json& tensors) {
  std::vector<nn::TensorSpec> out;
  for (const json& t : tensors) {
    nn::TensorSpec s;
    s.name = t.at("name");
    s.usage = t.at("usage") == "output" ? NRT_TENSOR_USAGE_OUTPUT : NRT_TENSOR_USAGE_INPUT;
    s.dtype = *nn::ParseDtype(t.at("dtype").get<std::string>());
    s.shape = t.at("shape").get<std::vector<uint32_t>>();
    out.push_back(std::move(s));
  }
  return out;
}

torch::Tensor View(nrt_tensor* t, const nn::TensorSpec& s) {
  std::vector<int64_t> shape(s.shape.begin(), s.shape.end());
  return torch::from_blob(t->data.data(), shape, torch::TensorOptions().dtype(TorchType(s.dtype)));
}

const int32_t* Ints(const TensorSet& in, const json& tensors, const std::string& role) {
  for (const json& t : tensors) {
    if (t.value("role", "") == role) {
      return reinterpret_cast<const int32_t*>(in.at(t.at("name").get<std::string>())->data.data());
    }
  }
  return nullptr;
}

// Real rows (context_lens > 0) and the padding rule the backend promises: a row's entries past
// its n = context_lens - position_ids[first] new tokens carry slot_pad (else BAD_INPUT).
NRT_STATUS CheckRows(const nrt_model* m, const TensorSet& in, int* real_rows) {
  const json& p = m->desc.at("program");
  const json& tensors = m->desc.at("tensors");
  const bool decode = p.at("phase") == "decode";
  const int32_t rows = decode ? p.at("max_seqs").get<int32_t>() : 1;
  const int32_t per_row = decode ? p.value("tokens_per_seq", 1) : p.at("max_tokens").get<int32_t>();
  const int32_t slot_pad = m->desc.value("slot_pad", -1);
  const int32_t* pos = Ints(in, tensors, "position_ids");
  const int32_t* slots = Ints(in, tensors, "slot_mapping");
  const int32_t* ctx = Ints(in, tensors, "context_lens");
  *real_rows = 0;
  for (int32_t r = 0; r < rows; ++r) {
    const int32_t n = ctx[r] > 0 ? ctx[r] - pos[r * per_row] : 0;
    if (ctx[r] > 0 && (n < 1 || n > per_row)) return nn::kNrtExecBadInput;
    *real_rows += ctx[r] > 0 ? 1 : 0;
    for (int32_t i = n; i < per_row; ++i) {
      if (slots[r * per_row + i] != slot_pad) {
        std::fprintf(stderr, "fake_nrt: padding token %d has slot %d, not slot_pad\n",
                     r * per_row + i, slots[r * per_row + i]);
        return nn::kNrtExecBadInput;
      }
    }
  }
  return 0;
}

}  // namespace

NRT_STATUS LoadTorchScript(const char* archive, size_t size, nrt_model* m) {
  try {
    torch::jit::ExtraFilesMap extra{{"pagoda_io.json", ""}};
    std::istringstream in(std::string(archive, size));
    auto program = std::make_shared<TorchProgram>();
    program->module = torch::jit::load(in, torch::kCPU, extra);
    program->module.eval();
    m->desc = json::parse(extra.at("pagoda_io.json"));
    m->io = SpecsOf(m->desc.at("tensors"));
    m->torch = std::move(program);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake_nrt: bad TorchScript program: %s\n", e.what());
    return nn::kNrtInvalid;
  }
  at::set_num_threads(1);  // the engine thread is the runtime's only caller
  return 0;
}

NRT_STATUS ExecuteTorchScript(nrt_model* m, const TensorSet& in, const TensorSet& out,
                              int* real_rows) {
  if (NRT_STATUS s = CheckRows(m, in, real_rows); s != 0) return s;
  std::vector<torch::jit::IValue> args;
  const nn::TensorSpec* output = nullptr;
  for (const nn::TensorSpec& s : m->io) {
    if (s.usage == NRT_TENSOR_USAGE_OUTPUT) {
      output = &s;
      continue;
    }
    args.emplace_back(View(in.at(s.name), s));
  }
  try {
    torch::NoGradGuard no_grad;
    const torch::Tensor logits = m->torch->module.forward(args).toTensor().contiguous();
    const torch::Tensor dst = View(out.at(output->name), *output);
    if (logits.sizes() != dst.sizes() || logits.scalar_type() != dst.scalar_type()) {
      std::fprintf(stderr, "fake_nrt: program %s returned %s, expected %s\n", m->id.c_str(),
                   c10::str(logits.sizes()).c_str(), output->ToString().c_str());
      return nn::kNrtInvalid;
    }
    dst.copy_(logits);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake_nrt: program %s failed: %s\n", m->id.c_str(), e.what());
    return nn::kNrtExecBadInput;
  }
  return 0;
}

}  // namespace fake_nrt
