// TlsFiles: the PEM files of the gRPC port's TLS (`--tls-cert`,
// `--tls-key`, `--tls-client-ca`), read and checked at start so that a
// wrong file is a clear error naming the flag instead of a handshake that
// fails for every client later: the certificate chain must parse, the key
// must parse and belong to the first certificate, and the client CA bundle
// must hold at least one certificate.
//
// A value; LoadTlsFiles() keeps no state and is thread-safe.

#ifndef BACKFILL_SERVER_TLS_FILES_H_
#define BACKFILL_SERVER_TLS_FILES_H_

#include <string>

#include "absl/status/statusor.h"

namespace backfill {

struct TlsFiles {
  std::string cert_chain;   // PEM: the server's certificate, then its chain
  std::string private_key;  // PEM
  std::string client_ca;    // PEM bundle; "": clients are not asked for one
};

// Reads and checks the files. INVALID_ARGUMENT naming the flag
// ("--tls-key: ...") when a file cannot be read, does not parse, or the key
// is not that of the certificate; `client_ca_path` may be "".
absl::StatusOr<TlsFiles> LoadTlsFiles(const std::string& cert_path,
                                      const std::string& key_path,
                                      const std::string& client_ca_path);

}  // namespace backfill

#endif  // BACKFILL_SERVER_TLS_FILES_H_
