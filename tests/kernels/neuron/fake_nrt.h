// Test-only hooks of the fake libnrt (fake_nrt.cc), looked up with dlsym by the tests.
#pragma once

#include <cstdint>

extern "C" {

struct FakeNrtCounters {
  int64_t tensors_allocated, tensors_freed;
  int64_t sets_allocated, sets_destroyed;
  int64_t models_loaded, models_unloaded;
  int64_t inits, closes, executes;
  int64_t leaked_at_last_close;  // tensors + sets + models alive when nrt_close last ran
};

// Fills `out` with the counters since the library was loaded.
typedef void (*FakeNrtGetCountersFn)(FakeNrtCounters* out);
void fake_nrt_get_counters(FakeNrtCounters* out);

}  // extern "C"
