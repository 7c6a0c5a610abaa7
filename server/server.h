// RunServer: `pagoda serve` -- load the model, build backend + engine, serve the gRPC API
// (pagoda.v1.Generation, grpc.health.v1.Health, reflection) and the HTTP metrics endpoint, and
// shut down gracefully on SIGTERM/SIGINT:
//   health -> NOT_SERVING, new requests -> UNAVAILABLE, in-flight requests get
//   server.shutdown_grace_seconds to finish, the rest are aborted, exit code 0.
// When the backend turns unhealthy (a fatal runtime error), the gRPC health service reports
// NOT_SERVING and /health and /ready answer 503 (checked about every 100 ms).
// A start-up failure prints "error: MESSAGE" on stderr and returns kExitStartupFailed, or for
// the Neuron backend's errors its own codes (kernels/neuron/neuron_backend.h: 2, 3, 4).
#pragma once

#include "runtime/runtime.h"
#include "server/config.h"

namespace pagoda {

// Exit codes of `pagoda serve`.
inline constexpr int kExitOk = 0;
inline constexpr int kExitStartupFailed = 1;  // model, backend or port problem
inline constexpr int kExitBadConfig = 2;      // invalid configuration

// Blocks until shutdown; returns the process exit code. `max_simd_level` and `f16_matmul` (the
// CPU kernels' --kernels / --f16-matmul) go to the runtime beside the config's options.
int RunServer(const PagodaConfig& config, cpu::SimdLevel max_simd_level = cpu::kMaxSimdLevel,
              cpu::mm::F16Matmul f16_matmul = cpu::mm::kDefaultF16Matmul);

}  // namespace pagoda
