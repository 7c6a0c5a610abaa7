// RunServer: `pagoda serve` -- load the model, build backend + engine, serve the gRPC API
// (pagoda.v1.Generation, grpc.health.v1.Health, reflection) on server.listen_address, the HTTP
// API (OpenAI-compatible, server/openai_api.h) on server.http_address and the metrics / health
// HTTP endpoint on server.metrics_address (both https with server.tls, like gRPC), and shut
// down gracefully on SIGTERM/SIGINT:
//   health -> NOT_SERVING, new requests -> UNAVAILABLE, in-flight requests get
//   server.shutdown_grace_seconds to finish, the rest are aborted, exit code 0.
// When the backend turns unhealthy (a fatal runtime error), the gRPC health service reports
// NOT_SERVING and /health and /ready answer 503 (checked about every 100 ms).
// A start-up failure prints "error: MESSAGE" on stderr and returns the exit code of its
// StartupError (runtime/runtime.h: 1 failed, 2 bad config, 3 device runtime unavailable,
// 4 compiled artifacts invalid).
#pragma once

#include "server/config.h"

namespace pagoda {

// Blocks until shutdown; returns the process exit code.
int RunServer(const PagodaConfig& config);

}  // namespace pagoda
