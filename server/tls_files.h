// TLS key material for every listener (server.tls): the certificate chain and private key,
// read and checked once at start-up so a bad file is reported by name and reason before any
// listener is built (gRPC alone would only say "cannot listen").
#pragma once

#include <string>

#include "common/status.h"

namespace pagoda {

struct TlsKeyPair {
  std::string cert_chain_pem;
  std::string private_key_pem;
};

// Reads both PEM files and checks that the first certificate parses, the key parses and the two
// belong together. INVALID_ARGUMENT naming server.tls.cert_file or server.tls.key_file otherwise.
Result<TlsKeyPair> ReadTlsKeyPair(const std::string& cert_file, const std::string& key_file);

}  // namespace pagoda
