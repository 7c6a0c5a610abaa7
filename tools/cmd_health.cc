// `pagoda health --server ADDR`: calls grpc.health.v1.Health/Check (used by the Docker
// HEALTHCHECK). Exit 0 when SERVING, 1 otherwise.
#include <cstdio>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tools/commands.h"
#include "tools/grpc_client.h"

namespace pagoda::cli {

void RegisterHealth(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ClientOptions>();
  auto service = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  o->timeout_s = 5;
  CLI::App* cmd = app.add_subcommand("health", "Check a running server's gRPC health");
  cmd->add_option("--server,-s", o->server, "Server address")->capture_default_str();
  cmd->add_option("--service", *service, "Service name (default: the whole server)");
  cmd->add_flag("--json", *json, "Print JSON");
  AddClientFlags(cmd, *o);
  cmd->callback([o, service, json, exit_code] {
    auto stub = grpc::health::v1::Health::NewStub(MakeChannel(*o));
    grpc::ClientContext ctx;
    PrepareContext(*o, &ctx);
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(*service);
    grpc::health::v1::HealthCheckResponse resp;
    const grpc::Status st = stub->Check(&ctx, req, &resp);
    const std::string status =
        st.ok() ? grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status())
                : "UNREACHABLE: " + st.error_message();
    if (*json) {
      std::printf("{\"server\": \"%s\", \"status\": \"%s\"}\n", o->server.c_str(), status.c_str());
    } else {
      std::printf("%s: %s\n", o->server.c_str(), status.c_str());
    }
    const bool serving = st.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
    *exit_code = serving ? 0 : 1;
  });
}

}  // namespace pagoda::cli
