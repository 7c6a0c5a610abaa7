// A fake libnrt.so.1 for tests (docs/neuron-backend.md 6.2): the same C symbols as the real runtime,
// declared from Pagoda's own kernels/neuron/nrt_api.h. Tensors live in host memory. nrt_load
// accepts only fake NEFFs: a 1024-byte NEFF header whose name starts with "pagoda-fake:",
// followed by a JSON program description whose kind, decoder_step_decode or
// decoder_step_prefill, runs Pagoda's CPU model (CpuBackend) on the bound tensors, reading and
// writing the bound KV tensors.
// Failure injection (read at every call): FAKE_NRT_FAIL="api:status[:nth][,...]" (nth is 1-based;
// without it every call fails), FAKE_NRT_NAN_OUTPUT=1 (every execution's logits are NaN),
// FAKE_NRT_MARKER=path (written when the library is loaded),
// FAKE_NRT_STRICT=1 (abort on leaks at nrt_close or on concurrent nrt_execute).
// Counters: fake_nrt_get_counters (in-process tests) and, with FAKE_NRT_COUNTERS=path, a JSON
// file rewritten at every nrt_close and at process exit (for tests of another process, e.g.
// `pagoda serve`): allocated/freed/live tensors, sets and models, inits, closes, executes,
// leaked_at_last_close, written_at ("nrt_close" | "exit"), calls (per API that can be failed
// by FAKE_NRT_FAIL) and per program id {loads, executes, real_executes, max_real_rows} (real =
// at least one non-padding row).
// A real runtime's state is process-global, so the fake's is too (this is test-only code).
#include "tests/kernels/neuron/fake_nrt.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/kernels/neuron/fake_nrt_internal.h"

namespace {

using fake_nrt::TensorSet;

struct ProgramCounts {
  int64_t loads = 0, executes = 0, real_executes = 0, max_real_rows = 0;
};

struct Global {
  std::mutex mu;
  bool initialized = false;
  bool closed = false;
  std::map<std::string, int64_t> calls;
  std::map<std::string, ProgramCounts> programs;  // guarded by mu
  std::atomic<int64_t> t_alloc{0}, t_free{0}, s_alloc{0}, s_free{0}, m_load{0}, m_unload{0};
  std::atomic<int64_t> inits{0}, closes{0}, executes{0}, leaked{0};
};
Global& G() {
  static Global* g = new Global();  // never destroyed: used until the process exits
  return *g;
}

using fake_nrt::Strict;

// The injected status for this call of `api`, or 0.
int Inject(const char* api) {
  int64_t n;
  {
    std::lock_guard<std::mutex> lock(G().mu);
    n = ++G().calls[api];
  }
  const char* spec = std::getenv("FAKE_NRT_FAIL");
  if (spec == nullptr) return 0;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) {
    std::vector<std::string> parts;
    std::stringstream is(item);
    for (std::string p; std::getline(is, p, ':');) parts.push_back(p);
    if (parts.size() < 2 || parts[0] != api) continue;
    if (parts.size() == 2 || std::stoll(parts[2]) == n) return std::stoi(parts[1]);
  }
  return 0;
}

NRT_STATUS Ready() {
  if (G().closed) return pagoda::neuron::kNrtClosed;
  if (!G().initialized) return pagoda::neuron::kNrtUninitialized;
  return 0;
}

#define FAKE_CHECK(api)                                                    \
  do {                                                                     \
    if (NRT_STATUS _s = fake_nrt::ReadyAndInject(api); _s != 0) return _s; \
  } while (0)

struct Marker {
  Marker() {
    if (const char* m = std::getenv("FAKE_NRT_MARKER")) std::ofstream(m) << "loaded\n";
  }
} marker;

// Writes the FAKE_NRT_COUNTERS file (if set) through a rename, so a reader never sees half.
void WriteCountersFile(const char* when) {
  const char* path = std::getenv("FAKE_NRT_COUNTERS");
  if (path == nullptr) return;
  Global& g = G();
  nlohmann::json j = {{"tensors_allocated", g.t_alloc.load()},
                      {"tensors_freed", g.t_free.load()},
                      {"tensors_live", g.t_alloc - g.t_free},
                      {"sets_allocated", g.s_alloc.load()},
                      {"sets_destroyed", g.s_free.load()},
                      {"sets_live", g.s_alloc - g.s_free},
                      {"models_loaded", g.m_load.load()},
                      {"models_unloaded", g.m_unload.load()},
                      {"models_live", g.m_load - g.m_unload},
                      {"inits", g.inits.load()},
                      {"closes", g.closes.load()},
                      {"executes", g.executes.load()},
                      {"leaked_at_last_close", g.leaked.load()},
                      {"written_at", when},
                      {"programs", nlohmann::json::object()}};
  {
    std::lock_guard<std::mutex> lock(g.mu);
    j["calls"] = g.calls;
    for (const auto& [id, c] : g.programs) {
      j["programs"][id] = {{"loads", c.loads},
                           {"executes", c.executes},
                           {"real_executes", c.real_executes},
                           {"max_real_rows", c.max_real_rows}};
    }
  }
  const std::string tmp = std::string(path) + ".tmp";
  std::ofstream(tmp) << j.dump(2) << "\n";
  std::rename(tmp.c_str(), path);
}

// The final counters, when the process exits (the library is never dlclose'd).
struct ExitWriter {
  ~ExitWriter() { WriteCountersFile("exit"); }
} exit_writer;

}  // namespace

namespace fake_nrt {
bool Strict() { return std::getenv("FAKE_NRT_STRICT") != nullptr; }
NRT_STATUS ReadyAndInject(const char* api) {
  if (NRT_STATUS s = Ready(); s != 0) return s;
  return Inject(api);
}
void CountProgramLoad(const std::string& id) {
  std::lock_guard<std::mutex> lock(G().mu);
  ++G().programs[id].loads;
}
void CountProgramExecute(const std::string& id, int real_rows) {
  std::lock_guard<std::mutex> lock(G().mu);
  ProgramCounts& c = G().programs[id];
  ++c.executes;
  c.real_executes += real_rows > 0 ? 1 : 0;
  c.max_real_rows = std::max<int64_t>(c.max_real_rows, real_rows);
}
void Count(Event e) {
  switch (e) {
    case Event::kLoad:
      ++G().m_load;
      break;
    case Event::kUnload:
      ++G().m_unload;
      break;
    case Event::kExecute:
      ++G().executes;
      break;
  }
}
}  // namespace fake_nrt

extern "C" {

void fake_nrt_get_counters(FakeNrtCounters* o) {
  Global& g = G();
  *o = {g.t_alloc,  g.t_free, g.s_alloc, g.s_free,   g.m_load,
        g.m_unload, g.inits,  g.closes,  g.executes, g.leaked};
}

NRT_STATUS nrt_get_version(nrt_version_t* v, size_t size) {
  if (size < sizeof(nrt_version_t)) return pagoda::neuron::kNrtInvalid;
  *v = {};
  v->rt_major = 2;
  v->rt_minor = 99;
  std::snprintf(v->rt_detail, sizeof(v->rt_detail), "pagoda fake");
  return 0;
}

const char* nrt_get_status_as_str(NRT_STATUS) { return nullptr; }  // names come from Pagoda

NRT_STATUS nrt_get_visible_vnc_count(uint32_t* n) {
  *n = 1;
  return 0;
}

NRT_STATUS nrt_init(nrt_framework_type_t, const char*, const char*) {
  if (NRT_STATUS s = Inject("nrt_init"); s != 0) return s;
  G().initialized = true;
  G().closed = false;
  ++G().inits;
  return 0;
}

void nrt_close() {
  Global& g = G();
  ++g.closes;
  const int64_t live = (g.t_alloc - g.t_free) + (g.s_alloc - g.s_free) + (g.m_load - g.m_unload);
  g.leaked = live;
  if (live != 0) {
    std::fprintf(stderr,
                 "fake_nrt: nrt_close with %lld objects alive (tensors %lld, sets %lld, "
                 "models %lld)\n",
                 static_cast<long long>(live), static_cast<long long>(g.t_alloc - g.t_free),
                 static_cast<long long>(g.s_alloc - g.s_free),
                 static_cast<long long>(g.m_load - g.m_unload));
  }
  g.initialized = false;
  g.closed = true;
  WriteCountersFile("nrt_close");
  if (live != 0 && Strict()) std::abort();
}

NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t, int vnc, size_t size, const char* name,
                               nrt_tensor_t** t) {
  FAKE_CHECK("nrt_tensor_allocate");
  *t = new nrt_tensor{std::vector<std::byte>(size), vnc, name != nullptr ? name : ""};
  ++G().t_alloc;
  return 0;
}

void nrt_tensor_free(nrt_tensor_t** t) {
  if (t == nullptr || *t == nullptr) return;
  delete *t;
  *t = nullptr;
  ++G().t_free;
}

NRT_STATUS nrt_tensor_read(const nrt_tensor_t* t, void* buf, size_t off, size_t size) {
  FAKE_CHECK("nrt_tensor_read");
  if (off + size > t->data.size()) return pagoda::neuron::kNrtInvalid;
  std::memcpy(buf, t->data.data() + off, size);
  return 0;
}

NRT_STATUS nrt_tensor_write(nrt_tensor_t* t, const void* buf, size_t off, size_t size) {
  FAKE_CHECK("nrt_tensor_write");
  if (off + size > t->data.size()) return pagoda::neuron::kNrtInvalid;
  std::memcpy(t->data.data() + off, buf, size);
  return 0;
}

NRT_STATUS nrt_tensor_memset(nrt_tensor_t* t, uint64_t off, int value, size_t size) {
  FAKE_CHECK("nrt_tensor_memset");
  if (off + size > t->data.size()) return pagoda::neuron::kNrtInvalid;
  std::memset(t->data.data() + off, value, size);
  return 0;
}

NRT_STATUS nrt_tensor_copy(const nrt_tensor_t* src, size_t so, nrt_tensor_t* dst, size_t d,
                           size_t size) {
  FAKE_CHECK("nrt_tensor_copy");
  if (src->vnc != dst->vnc || so + size > src->data.size() || d + size > dst->data.size()) {
    return pagoda::neuron::kNrtInvalid;
  }
  std::memmove(dst->data.data() + d, src->data.data() + so, size);
  return 0;
}

NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t** set) {
  FAKE_CHECK("nrt_allocate_tensor_set");
  *set = new TensorSet();
  ++G().s_alloc;
  return 0;
}

void nrt_destroy_tensor_set(nrt_tensor_set_t** set) {
  if (set == nullptr || *set == nullptr) return;
  delete static_cast<TensorSet*>(*set);
  *set = nullptr;
  ++G().s_free;
}

NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t* set, const char* name, nrt_tensor_t* t) {
  FAKE_CHECK("nrt_add_tensor_to_tensor_set");
  (*static_cast<TensorSet*>(set))[name] = t;
  return 0;
}

}  // extern "C"
