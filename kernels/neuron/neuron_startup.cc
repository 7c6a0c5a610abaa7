// NeuronBackend start-up and shutdown (docs/neuron-backend.md 5.5 and 5.7).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "common/mapped_file.h"
#include "kernels/neuron/bucketing.h"
#include "kernels/neuron/neuron_backend.h"
#include "kernels/neuron/neuron_env.h"
#include "kernels/neuron/nrt_status.h"

namespace pagoda {

namespace neuron {
namespace {

std::string ResolvePath(const std::string& dir, const std::string& file) {
  if (file.empty() || file[0] == '/' || dir.empty()) return file;
  return dir + "/" + file;
}

// Maps `path` read-only (NEFFs and weights are handed to the runtime without a copy).
Result<MappedFile> MapFile(const std::string& path) {
  Result<MappedFile> file = MappedFile::Open(path);
  if (!file.ok()) return FailedPrecondition("neuron backend: cannot open " + path);
  return file;
}

// Keeps only the programs named in `enable` (neuron.buckets.enable; empty = all), in its order.
Status FilterPrograms(NeuronManifest& m, const std::vector<std::string>& enable) {
  if (enable.empty()) return Status::Ok();
  std::vector<ManifestProgram> kept;
  for (const std::string& id : enable) {
    auto it = std::find_if(m.programs.begin(), m.programs.end(),
                           [&](const ManifestProgram& p) { return p.id == id; });
    if (it == m.programs.end()) {
      std::string ids;
      for (const ManifestProgram& p : m.programs) ids += (ids.empty() ? "" : ", ") + p.id;
      return InvalidArgument("neuron backend: neuron.buckets.enable: no program '" + id + "' in " +
                             m.path + " (it has: " + ids + ")");
    }
    if (std::count(enable.begin(), enable.end(), id) > 1) {
      return InvalidArgument("neuron backend: neuron.buckets.enable: '" + id +
                             "' is listed more than once");
    }
    kept.push_back(*it);
  }
  m.programs = std::move(kept);
  return Status::Ok();
}

std::string InitDiagnostics() {
  bool dev = false;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    dev |= e.path().filename().string().starts_with("neuron");
  }
  const char* vc = std::getenv("NEURON_RT_VISIBLE_CORES");
  return std::string("\n  /dev/neuron*: ") +
         (dev ? "present" : "none found (not a Neuron instance or driver not loaded)") +
         "\n  NEURON_RT_VISIBLE_CORES=" + (vc != nullptr ? vc : "(unset)") +
         "\n  Run `neuron-ls` to see which process holds the cores.";
}

}  // namespace

Result<std::unique_ptr<NeuronBackend>> NeuronBackend::Create(const ModelConfig& config,
                                                             const NeuronOptions& o,
                                                             const StepLimits& limits) {
  if (o.artifacts_dir.empty()) {
    return InvalidArgument("neuron backend: neuron.artifacts_dir: must be set");
  }
  PAGODA_ASSIGN_OR_RETURN(NeuronManifest m, LoadManifest(ResolvePath(o.artifacts_dir, o.manifest)));
  PAGODA_RETURN_IF_ERROR(CheckLnc(m, o.logical_nc_config));
  PAGODA_RETURN_IF_ERROR(CheckManifestAgainstModel(m, config));
  PAGODA_RETURN_IF_ERROR(FilterPrograms(m, o.buckets_enable));
  PAGODA_RETURN_IF_ERROR(CheckHasBothPhases(m));
  PAGODA_ASSIGN_OR_RETURN(LoadedNrt nrt, LoadNrt(o.runtime_library));
  spdlog::info("neuron backend: loaded {} (libnrt {})", nrt.path, nrt.version);
  PAGODA_RETURN_IF_ERROR(ExportEnv(o));
  std::unique_ptr<NeuronBackend> b(new NeuronBackend(std::move(nrt), std::move(m), o));
  PAGODA_RETURN_IF_ERROR(b->Init());
  b->caps_.name = "neuron";
  b->caps_.kernels = "neuron";  // compiled programs, no CPU kernel level
  b->caps_.max_num_seqs = limits.max_num_seqs;
  b->caps_.max_num_batched_tokens = limits.max_num_batched_tokens;
  b->caps_.block_size = b->manifest_.block_size;
  b->caps_.num_blocks = b->manifest_.num_blocks;
  // Speculative verification only with a multi-token decode program: verifying k drafts
  // through single-token programs would take k + 1 executions, slower than not speculating.
  b->caps_.multi_token_logits = MaxTokensPerSeq(b->manifest_.programs, 0) > 1;
  b->caps_.max_model_len = std::min(
      config.context_length, MaxContextBlocks(b->manifest_.programs) * b->manifest_.block_size);
  return b;
}

NeuronBackend::NeuronBackend(LoadedNrt nrt, NeuronManifest manifest, const NeuronOptions& options)
    : nrt_(std::move(nrt)), api_(nrt_.api), manifest_(std::move(manifest)), options_(options) {}

Status NeuronBackend::Init() {
  if (api_.get_visible_vnc_count != nullptr) {
    uint32_t n = 0;
    if (api_.get_visible_vnc_count(&n) == kNrtSuccess) {
      spdlog::info("neuron backend: {} visible logical cores", n);
    }
  }
  const NRT_STATUS st = api_.init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
  if (st != kNrtSuccess) {
    return Status(StatusCode::kUnavailable, "neuron backend: nrt_init failed: " +
                                                NrtStatusName(st, &api_) + "." + InitDiagnostics());
  }
  initialized_ = true;
  for (const ManifestProgram& spec : manifest_.programs) PAGODA_RETURN_IF_ERROR(LoadProgram(spec));
  PAGODA_RETURN_IF_ERROR(AllocateState());
  for (Program& p : programs_) PAGODA_RETURN_IF_ERROR(BindProgram(p));
  if (api_.get_vnc_memory_stats != nullptr) {
    nrt_vnc_memory_stats_t ms{};
    size_t got = 0;
    if (api_.get_vnc_memory_stats(std::max(options_.vnc, 0), &ms, sizeof(ms), &got) == 0) {
      spdlog::info("neuron backend: device memory {} used of {}", ms.bytes_used, ms.bytes_limit);
    }
  }
  return options_.warmup ? Warmup() : Status::Ok();
}

Status NeuronBackend::LoadProgram(const ManifestProgram& spec) {
  const std::string path = ResolvePath(manifest_.dir, spec.neff);
  PAGODA_ASSIGN_OR_RETURN(MappedFile neff, MapFile(path));
  const std::span<const uint8_t> bytes = neff.bytes();
  PAGODA_ASSIGN_OR_RETURN(NeffHeader h, ParseNeffHeader(bytes.data(), bytes.size(), path));
  if (h.lnc_size != 0 && static_cast<int32_t>(h.lnc_size) != options_.logical_nc_config) {
    return FailedPrecondition("neuron backend: LNC mismatch: neuron.logical_nc_config is " +
                              std::to_string(options_.logical_nc_config) + " but " + path +
                              " was compiled for lnc " + std::to_string(h.lnc_size));
  }
  spdlog::info("neuron backend: loading {} ({}, NEFF '{}')", spec.id, path, h.name);
  Program p;
  p.spec = spec;
  const NRT_STATUS st = api_.load(bytes.data(), bytes.size(), options_.vnc, -1, &p.model);
  if (st != kNrtSuccess) {
    return Status(StatusCode::kUnavailable,
                  "neuron backend: nrt_load(" + path + ") failed: " + NrtStatusName(st, &api_));
  }
  programs_.push_back(std::move(p));
  nrt_tensor_info_array_t* info = nullptr;
  PAGODA_RETURN_IF_ERROR(Check(api_.get_model_tensor_info(programs_.back().model, &info),
                               "nrt_get_model_tensor_info(" + spec.id + ")"));
  const std::string diff = DiffTensors(ExpectedTensors(manifest_, spec), FromTensorInfo(*info));
  api_.free_model_tensor_info(info);
  if (!diff.empty()) {
    return FailedPrecondition("neuron backend: program '" + spec.id + "' (" + path +
                              ") does not match the manifest (- manifest, + runtime):\n" + diff);
  }
  return Status::Ok();
}

Status NeuronBackend::Allocate(size_t bytes, const std::string& name, nrt_tensor_t** t) {
  const NRT_STATUS st = api_.tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, std::max(options_.vnc, 0),
                                             bytes, name.c_str(), t);
  if (st == kNrtResource) {
    return ResourceExhausted("neuron backend: out of device memory allocating " + name + " (" +
                             std::to_string(bytes) +
                             " bytes); compile with fewer kv_cache.num_blocks");
  }
  return Check(st, "nrt_tensor_allocate(" + name + ")");
}

Status NeuronBackend::AllocateState() {
  const ManifestProgram& any = manifest_.programs.front();
  const std::vector<TensorSpec> specs = ExpectedTensors(manifest_, any);
  for (int l = 0; l < manifest_.n_layers; ++l) {
    for (int v = 0; v < 2; ++v) {
      const TensorSpec& s = specs[IoRoles().size() + 2 * l + v];
      kv_.push_back(nullptr);
      PAGODA_RETURN_IF_ERROR(Allocate(s.bytes(), s.name, &kv_.back()));
      PAGODA_RETURN_IF_ERROR(Check(api_.tensor_memset(kv_.back(), 0, 0, s.bytes()), "memset"));
    }
  }
  kv_block_bytes_ = static_cast<size_t>(manifest_.n_kv_heads) * manifest_.block_size *
                    manifest_.head_dim * DtypeSize(*ParseDtype(manifest_.kv_dtype));
  for (const ManifestWeight& w : manifest_.weights) {
    const std::string path = ResolvePath(manifest_.dir, w.file);
    PAGODA_ASSIGN_OR_RETURN(MappedFile file, MapFile(path));
    const std::span<const uint8_t> bytes = file.bytes();
    const TensorSpec s{w.name, NRT_TENSOR_USAGE_INPUT, *ParseDtype(w.dtype), w.shape};
    if (bytes.size() != s.bytes()) {
      return FailedPrecondition("neuron backend: " + path + ": " + std::to_string(bytes.size()) +
                                " bytes, the manifest says " + s.ToString());
    }
    weights_.push_back(nullptr);
    PAGODA_RETURN_IF_ERROR(Allocate(s.bytes(), s.name, &weights_.back()));
    PAGODA_RETURN_IF_ERROR(Check(api_.tensor_write(weights_.back(), bytes.data(), 0, bytes.size()),
                                 "write " + w.name));
  }
  return Status::Ok();
}

Status NeuronBackend::BindProgram(Program& p) {
  PAGODA_RETURN_IF_ERROR(Check(api_.allocate_tensor_set(&p.inputs), "nrt_allocate_tensor_set"));
  PAGODA_RETURN_IF_ERROR(Check(api_.allocate_tensor_set(&p.outputs), "nrt_allocate_tensor_set"));
  const std::vector<TensorSpec> specs = ExpectedTensors(manifest_, p.spec);
  size_t max_rows = ids_.size();
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    nrt_tensor_t* t = nullptr;
    if (i < IoRoles().size()) {
      PAGODA_RETURN_IF_ERROR(Allocate(s.bytes(), p.spec.id + "." + s.name, &t));
      p.io.push_back(t);
    } else {
      const size_t state = i - IoRoles().size();
      t = state < kv_.size() ? kv_[state] : weights_[state - kv_.size()];
    }
    nrt_tensor_set_t* set = s.usage == NRT_TENSOR_USAGE_INPUT ? p.inputs : p.outputs;
    PAGODA_RETURN_IF_ERROR(Check(api_.add_tensor_to_tensor_set(set, s.name.c_str(), t),
                                 "nrt_add_tensor_to_tensor_set(" + s.name + ")"));
  }
  max_rows = std::max<size_t>(max_rows, p.spec.tokens());
  ids_.resize(max_rows);
  pos_.resize(max_rows);
  slots_.resize(max_rows);
  const size_t table = static_cast<size_t>(p.spec.rows()) * p.spec.max_ctx_blocks;
  table_.resize(std::max(table_.size(), table));
  ctx_.resize(std::max<size_t>(ctx_.size(), p.spec.rows()));
  return Status::Ok();
}

// Executes every program once on all-padding inputs (no KV write) and checks the logits.
Status NeuronBackend::Warmup() {
  std::vector<float> logits;
  for (Program& p : programs_) {
    ResetStaging(p);
    logits.assign(static_cast<size_t>(p.spec.logit_rows()) * manifest_.vocab, 0.0f);
    PAGODA_RETURN_IF_ERROR(RunProgram(p, 0, p.spec.logit_rows(), logits.data()));
    for (float x : logits) {
      if (!std::isfinite(x)) {
        return FailedPrecondition("neuron backend: warm-up of '" + p.spec.id +
                                  "' produced non-finite logits");
      }
    }
  }
  num_executions_ = 0;
  return Status::Ok();
}

NeuronBackend::~NeuronBackend() {
  for (Program& p : programs_) {
    if (p.inputs != nullptr) api_.destroy_tensor_set(&p.inputs);
    if (p.outputs != nullptr) api_.destroy_tensor_set(&p.outputs);
  }
  for (Program& p : programs_) {
    for (nrt_tensor_t*& t : p.io) {
      if (t != nullptr) api_.tensor_free(&t);
    }
  }
  for (auto* list : {&weights_, &kv_}) {
    for (nrt_tensor_t*& t : *list) {
      if (t != nullptr) api_.tensor_free(&t);
    }
  }
  for (Program& p : programs_) {
    if (p.model != nullptr) api_.unload(p.model);
  }
  if (initialized_) api_.close();
}

}  // namespace neuron

Result<std::unique_ptr<Backend>> CreateNeuronBackend(const ModelConfig& config,
                                                     const NeuronOptions& options,
                                                     const StepLimits& limits) {
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<neuron::NeuronBackend> b,
                          neuron::NeuronBackend::Create(config, options, limits));
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace pagoda
