#include "server/daemon_options.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"
#include "openlineage/emitter.h"
#include "server/basic_auth_credentials.h"
#include "server/bearer_tokens.h"
#include "server/tls_files.h"
#include "storage/postgres/pg_connection.h"

namespace backfill {
namespace {

// Checks that `address` is HOST:PORT (a bare port would make gRPC or the
// metrics endpoint listen on every interface).
absl::Status CheckAddress(const char* flag, const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " \"", address,
                     "\" is not HOST:PORT (e.g. 127.0.0.1:50051; port 0 picks "
                     "a free one)"));
  }
  return absl::OkStatus();
}

// The ranges of the limits: below them the daemon could not work, above
// them a limit no longer limits anything.
constexpr int64_t kMinMessageBytes = 1 << 10;
constexpr int64_t kMaxMessageBytes = int64_t{1} << 30;
constexpr int64_t kMaxWatchStreamsLimit = 10000;
constexpr int64_t kMaxQueuedJobsLimit = 1000000;
constexpr int64_t kMaxPartitionsPerJobLimit = 100000000;

absl::Status CheckRange(const char* flag, int64_t value, int64_t min,
                        int64_t max, const char* unit) {
  if (value >= min && value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(flag, " ", value,
                                                 " is out of range: give ", min,
                                                 " to ", max, " ", unit));
}

}  // namespace

bool MetricsEnabled(const DaemonOptions& options) {
  return !options.metrics_listen.empty() && options.metrics_listen != "none";
}

bool IsLocalOnlyAddress(const std::string& listen) {
  std::string host = listen;
  if (absl::StartsWith(host, "[")) {
    const size_t close = host.find(']');
    if (close == std::string::npos) return false;
    host = host.substr(1, close - 1);
  } else if (const size_t colon = host.rfind(':'); colon != std::string::npos) {
    host = host.substr(0, colon);
  }
  if (absl::EqualsIgnoreCase(host, "localhost") || host == "::1") return true;
  // 127.0.0.0/8, written as a dotted quad.
  const std::vector<std::string> parts = absl::StrSplit(host, '.');
  if (parts.size() != 4 || parts[0] != "127") return false;
  for (const std::string& part : parts) {
    int octet = 0;
    if (part.empty() || part.size() > 3 ||
        part.find_first_not_of("0123456789") != std::string::npos ||
        !absl::SimpleAtoi(part, &octet) || octet < 0 || octet > 255) {
      return false;
    }
  }
  return true;
}

absl::Status CheckServingOptions(const DaemonOptions& options) {
  if (options.data_dir.empty()) {
    return absl::InvalidArgumentError("--data-dir is required");
  }
  if (absl::Status s = CheckAddress("--listen", options.listen); !s.ok()) {
    return s;
  }
  if (MetricsEnabled(options)) {
    if (absl::Status s =
            CheckAddress("--metrics-listen", options.metrics_listen);
        !s.ok()) {
      return s;
    }
  }
  if (!options.http_listen.empty()) {
    if (absl::Status s = CheckAddress("--http-listen", options.http_listen);
        !s.ok()) {
      return s;
    }
    if (options.http_listen == options.listen ||
        (MetricsEnabled(options) &&
         options.http_listen == options.metrics_listen)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--http-listen ", options.http_listen,
          " is the address of another port of this daemon: give it one of "
          "its own"));
    }
  }
  return absl::OkStatus();
}

namespace {

// The refusal of a port other machines reach that is not both encrypted
// and authenticated.
absl::Status UnprotectedAddressError(const char* flag,
                                     const std::string& address, bool tls,
                                     bool authenticated) {
  return absl::InvalidArgumentError(absl::StrCat(
      flag, " ", address, " can be reached from other machines, but ",
      !tls ? "the port is not encrypted (no --tls-cert and --tls-key)" : "",
      !tls && !authenticated ? " and " : "",
      !authenticated
          ? "no caller is authenticated (no --auth-tokens or "
            "--tls-client-ca): anyone who reaches it may submit, approve and "
            "roll back backfills"
          : "",
      !tls && authenticated
          ? ", so bearer tokens would cross the network in the clear"
          : "",
      ". Give both, listen on a loopback address, or give --insecure to "
      "accept the risk (a private network)"));
}

}  // namespace

absl::Status CheckSecurityOptions(const DaemonOptions& options) {
  const bool tls =
      !options.tls_cert_file.empty() || !options.tls_key_file.empty();
  if (tls && (options.tls_cert_file.empty() || options.tls_key_file.empty())) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together: give the certificate (chain) "
        "and its private key");
  }
  if (!options.tls_client_ca_file.empty() && !tls) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs --tls-cert and --tls-key: client certificates "
        "are verified only over TLS");
  }
  if (tls) {
    absl::StatusOr<TlsFiles> files =
        LoadTlsFiles(options.tls_cert_file, options.tls_key_file,
                     options.tls_client_ca_file);
    if (!files.ok()) return files.status();
  }
  bool tokens_given = false;
  if (!options.auth_tokens_file.empty()) {
    absl::StatusOr<BearerTokens> tokens =
        BearerTokens::Load(options.auth_tokens_file);
    if (!tokens.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth-tokens: ", tokens.status().message()));
    }
    if (tokens->has_certificate_principals() &&
        options.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auth-tokens: ", options.auth_tokens_file,
          " has entries with client_certificate: true, but without "
          "--tls-client-ca no client certificate is asked for"));
    }
    tokens_given = true;
  }
  const bool metrics_on = MetricsEnabled(options);
  if (!options.metrics_basic_auth_file.empty()) {
    if (!metrics_on) {
      return absl::InvalidArgumentError(
          "--metrics-basic-auth needs /metrics on: give --metrics-listen "
          "HOST:PORT (not \"none\")");
    }
    absl::StatusOr<BasicAuthCredentials> credentials =
        BasicAuthCredentials::Load(options.metrics_basic_auth_file);
    if (!credentials.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--metrics-basic-auth: ", credentials.status().message()));
    }
  }
  if (metrics_on && !options.insecure &&
      options.metrics_basic_auth_file.empty() &&
      !IsLocalOnlyAddress(options.metrics_listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-listen ", options.metrics_listen,
        " can be reached from other machines, but /metrics asks for no "
        "credentials (no --metrics-basic-auth): anyone who reaches it reads "
        "the datasets' names, job counts and costs. Give --metrics-basic-auth "
        "FILE, listen on a loopback address, or give --insecure to accept the "
        "risk (a private network)"));
  }
  const bool authenticated =
      tokens_given || !options.tls_client_ca_file.empty();
  for (const auto& [flag, address] :
       {std::pair<const char*, const std::string*>{"--listen", &options.listen},
        {"--http-listen", &options.http_listen}}) {
    if (address->empty() || options.insecure || IsLocalOnlyAddress(*address) ||
        (tls && authenticated)) {
      continue;
    }
    return UnprotectedAddressError(flag, *address, tls, authenticated);
  }
  return absl::OkStatus();
}

absl::Status CheckLimitOptions(const DaemonOptions& options) {
  RETURN_IF_ERROR(CheckRange("--max-message-bytes", options.max_message_bytes,
                             kMinMessageBytes, kMaxMessageBytes, "bytes"));
  RETURN_IF_ERROR(CheckRange("--max-watch-streams-per-principal",
                             options.max_watch_streams_per_principal, 1,
                             kMaxWatchStreamsLimit, "streams"));
  RETURN_IF_ERROR(CheckRange("--max-queued-jobs", options.max_queued_jobs, 1,
                             kMaxQueuedJobsLimit, "jobs"));
  return CheckRange("--max-partitions-per-job", options.max_partitions_per_job,
                    1, kMaxPartitionsPerJobLimit, "partitions");
}

absl::Status CheckReplicaOptions(const DaemonOptions& options) {
  if (!options.state_dsn.empty()) {
    absl::StatusOr<postgres::PgDsnInfo> info =
        postgres::ParseDsn(options.state_dsn);
    if (!info.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--state-dsn: ", info.status().message()));
    }
    if (info->has_password) {
      return absl::InvalidArgumentError(
          "--state-dsn holds a password, which every user of this machine "
          "can read in the process list; remove it and give it to libpq "
          "instead (PGPASSWORD, ~/.pgpass or PGPASSFILE)");
    }
  }
  if (options.node_name.size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--node-name is ", options.node_name.size(), " bytes; at most 128"));
  }
  for (unsigned char c : options.node_name) {
    if (c <= 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(
          "--node-name holds a space or a control character; use letters, "
          "digits and punctuation (e.g. backfilld-0 or host:50051)");
    }
  }
  return CheckRange("--lease-seconds", options.lease_seconds, 2, 3600,
                    "seconds");
}

absl::Status CheckOpenLineageOptions(const DaemonOptions& options) {
  if (options.openlineage_url.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> endpoint =
      openlineage::LineageEndpoint(options.openlineage_url);
  if (!endpoint.ok()) return endpoint.status();
  return openlineage::ValidateNamespace(options.openlineage_namespace);
}

}  // namespace backfill
