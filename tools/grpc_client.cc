#include "tools/grpc_client.h"

#include <chrono>
#include <fstream>
#include <sstream>

namespace pagoda::cli {

std::shared_ptr<grpc::Channel> MakeChannel(const ClientOptions& o) {
  if (o.tls_ca.empty()) return grpc::CreateChannel(o.server, grpc::InsecureChannelCredentials());
  std::ifstream in(o.tls_ca);
  std::stringstream ss;
  ss << in.rdbuf();
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = ss.str();
  return grpc::CreateChannel(o.server, grpc::SslCredentials(opts));
}

void PrepareContext(const ClientOptions& o, grpc::ClientContext* ctx) {
  if (!o.token.empty()) ctx->AddMetadata("authorization", "Bearer " + o.token);
  if (o.timeout_s > 0) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000)));
  }
}

void AddClientFlags(CLI::App* cmd, ClientOptions& o) {
  cmd->add_option("--token", o.token, "Bearer token for the server");
  cmd->add_option("--tls-ca", o.tls_ca, "CA certificate (PEM) to trust; enables TLS");
  cmd->add_option("--timeout", o.timeout_s, "Deadline in seconds (0 = none)");
}

}  // namespace pagoda::cli
