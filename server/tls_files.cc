#include "server/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

namespace pagoda {
namespace {

Result<std::string> ReadFile(const std::string& key, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(key + ": cannot read '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// OpenSSL's reason for the last failure, or `fallback`; clears OpenSSL's error queue.
std::string OpenSslReason(const char* fallback) {
  const unsigned long code = ERR_peek_last_error();
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  ERR_clear_error();
  return reason != nullptr ? reason : fallback;
}

using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;
using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

Bio MemoryBio(const std::string& text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())), &BIO_free);
}

}  // namespace

Result<TlsKeyPair> ReadTlsKeyPair(const std::string& cert_file, const std::string& key_file) {
  TlsKeyPair pair;
  PAGODA_ASSIGN_OR_RETURN(pair.cert_chain_pem, ReadFile("server.tls.cert_file", cert_file));
  PAGODA_ASSIGN_OR_RETURN(pair.private_key_pem, ReadFile("server.tls.key_file", key_file));
  Bio cert_bio = MemoryBio(pair.cert_chain_pem);
  Cert cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr), &X509_free);
  if (!cert) {
    return InvalidArgument("server.tls.cert_file: '" + cert_file +
                           "' is not a PEM certificate (-----BEGIN CERTIFICATE-----): " +
                           OpenSslReason("no certificate found"));
  }
  Bio key_bio = MemoryBio(pair.private_key_pem);
  Key key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (!key) {
    return InvalidArgument(
        "server.tls.key_file: '" + key_file +
        "' is not an unencrypted PEM private key: " + OpenSslReason("no private key found"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return InvalidArgument("server.tls.key_file: '" + key_file +
                           "' does not match the certificate in '" + cert_file +
                           "': " + OpenSslReason("key mismatch"));
  }
  ERR_clear_error();
  return pair;
}

}  // namespace pagoda
