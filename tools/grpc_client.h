// Client helpers for the CLI commands that talk to a running `pagoda serve`.
#pragma once

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace pagoda::cli {

struct ClientOptions {
  std::string server = "127.0.0.1:50051";
  std::string token;     // bearer token, if the server wants one
  std::string tls_ca;    // PEM file of the CA to trust; empty = plaintext
  double timeout_s = 0;  // 0 = no deadline
};

std::shared_ptr<grpc::Channel> MakeChannel(const ClientOptions& o);
// Applies the token and deadline to a call.
void PrepareContext(const ClientOptions& o, grpc::ClientContext* ctx);
void AddClientFlags(CLI::App* cmd, ClientOptions& o);

}  // namespace pagoda::cli
