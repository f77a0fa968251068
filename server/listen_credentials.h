// ListenCredentials: the credentials of the gRPC port (--listen): plaintext
// without --tls-cert; else TLS with the certificate chain and key of
// --tls-cert and --tls-key, and with --tls-client-ca, client certificates
// required and verified against that CA bundle. The files are read and
// checked by LoadTlsFiles() (server/tls_files.h).
//
// A value; it shares ownership of the gRPC credentials with the servers
// built with them. LoadListenCredentials() keeps no state and is
// thread-safe.

#ifndef BACKFILL_SERVER_LISTEN_CREDENTIALS_H_
#define BACKFILL_SERVER_LISTEN_CREDENTIALS_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace grpc {
class ServerCredentials;
}  // namespace grpc

namespace backfill {

struct ListenCredentials {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // Set with TLS on: what the daemon's "TLS on ADDRESS" log line adds, ""
  // or ", client certificates required and verified". nullopt: plaintext.
  std::optional<std::string> tls_note;
};

// Plaintext when `cert_file` is ""; else TLS (`client_ca_file` may be "").
// LoadTlsFiles()'s errors when a file does not load.
absl::StatusOr<ListenCredentials> LoadListenCredentials(
    const std::string& cert_file, const std::string& key_file,
    const std::string& client_ca_file);

}  // namespace backfill

#endif  // BACKFILL_SERVER_LISTEN_CREDENTIALS_H_
