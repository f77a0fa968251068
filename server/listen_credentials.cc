#include "server/listen_credentials.h"

#include <string>
#include <utility>

#include "grpcpp/security/server_credentials.h"
#include "server/tls_files.h"

namespace backfill {

absl::StatusOr<ListenCredentials> LoadListenCredentials(
    const std::string& cert_file, const std::string& key_file,
    const std::string& client_ca_file) {
  ListenCredentials out;
  out.credentials = grpc::InsecureServerCredentials();
  if (cert_file.empty()) return out;
  absl::StatusOr<TlsFiles> tls =
      LoadTlsFiles(cert_file, key_file, client_ca_file);
  if (!tls.ok()) return tls.status();
  grpc::SslServerCredentialsOptions ssl(
      tls->client_ca.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = tls->client_ca;
  ssl.pem_key_cert_pairs.push_back({tls->private_key, tls->cert_chain});
  out.credentials = grpc::SslServerCredentials(ssl);
  out.tls_note = tls->client_ca.empty()
                     ? ""
                     : ", client certificates required and verified";
  return out;
}

}  // namespace backfill
