// RunServer: `pagoda serve` -- load the model, build backend + engine, serve the gRPC API
// (pagoda.v1.Generation, grpc.health.v1.Health, reflection) and the HTTP metrics endpoint, and
// shut down gracefully on SIGTERM/SIGINT:
//   health -> NOT_SERVING, new requests -> UNAVAILABLE, in-flight requests get
//   server.shutdown_grace_seconds to finish, the rest are aborted, exit code 0.
#pragma once

#include "server/config.h"

namespace pagoda {

// Exit codes of `pagoda serve`.
inline constexpr int kExitOk = 0;
inline constexpr int kExitStartupFailed = 1;  // model, backend or port problem
inline constexpr int kExitBadConfig = 2;      // invalid configuration

// Blocks until shutdown; returns the process exit code.
int RunServer(const PagodaConfig& config);

}  // namespace pagoda
