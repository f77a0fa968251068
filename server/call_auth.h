// CallAuth: who is calling an RPC of backfill.v1.BackfillService, and
// whether they may. The service asks it for every call before the request
// is even parsed (server/raw_request.h), so that a caller without the right
// credentials gets nothing from the daemon but a refusal.
//
// With a token file (`--auth-tokens`), a call must carry (gRPC metadata or HTTP
// header)
//   authorization: Bearer <token>
// whose token the file knows (server/bearer_tokens.h), or, on a port that
// verifies client certificates (`--tls-client-ca`), a certificate whose
// Common Name the file lists with `client_certificate: true`; and the
// principal must hold a role that allows the method (server/access_policy.h):
//   no authorization value, or not "Bearer <token>"   UNAUTHENTICATED
//   a token the file does not know                       UNAUTHENTICATED
//   a principal whose roles do not allow the method      PERMISSION_DENIED
// Each refusal is counted,
//   backfill_auth_refusals_total{grpc_method, grpc_code}  counter
// and logged with the method, the peer and (for PERMISSION_DENIED) the
// principal; never with the token. Without a token file, every call is
// admitted and has no principal.
//
// The HTTP server (server/http_api.h) asks the same questions with the
// same method names, so that a principal may do the same over both.
//
// The health and reflection services are not BackfillService's and are
// never asked about: probes and tools need them without credentials, and
// they reveal nothing a token protects.
//
// Holds the token set (shared, immutable; ReplaceTokens() swaps in a new
// one for later calls, e.g. on SIGHUP) and borrows the registry, which
// must outlive it. Thread-safe: every method may be called concurrently.

#ifndef BACKFILL_SERVER_CALL_AUTH_H_
#define BACKFILL_SERVER_CALL_AUTH_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "server/access_policy.h"
#include "server/bearer_tokens.h"

namespace prometheus {
class Counter;
template <typename T>
class Family;
class Registry;
}  // namespace prometheus

namespace backfill {

// What a call presents to prove who makes it, whatever carries it (gRPC
// metadata, HTTP headers, the TLS session).
struct CallCredentials {
  // Every "authorization" value of the call, as sent.
  std::vector<std::string> authorization;
  // The Common Name of its verified client certificate, if the port
  // verifies them (--tls-client-ca) and the call has one.
  std::optional<std::string> certificate_name;
  // The client's address, for the log of a refusal.
  std::string peer;
};

class CallAuth {
 public:
  // `tokens` null: authorization off (every call admitted). `registry`
  // null: refusals are not counted (tests). `client_certificates`: the port
  // verifies client certificates (--tls-client-ca), so a call without a
  // token signs in with its certificate's Common Name.
  CallAuth(std::shared_ptr<const BearerTokens> tokens,
           prometheus::Registry* registry, bool client_certificates = false);

  CallAuth(const CallAuth&) = delete;
  CallAuth& operator=(const CallAuth&) = delete;

  // Whether a token file is in force (fixed at construction).
  bool enabled() const { return enabled_; }

  // Puts `tokens` (already loaded and checked) in force for every call
  // admitted from now on. FAILED_PRECONDITION, nothing changed, when
  // authorization is off (tokens were not given at start) or `tokens` is
  // null.
  absl::Status ReplaceTokens(std::shared_ptr<const BearerTokens> tokens);

  // The principal of the call: the token's, else the client certificate's
  // (by its Common Name; with a token file, only a name the file lists with
  // client_certificate: true); nullopt when there is neither and no token
  // file; UNAUTHENTICATED (saying what is missing or wrong) when a token
  // file requires credentials and those of the call name no one.
  absl::StatusOr<std::optional<Principal>> Authenticate(
      const grpc::ServerContext& context) const;
  absl::StatusOr<std::optional<Principal>> Authenticate(
      const CallCredentials& credentials) const;

  // Authenticate() and then MayCall(principal, method): OK to go on, or the
  // refusal to answer with (counted and logged). `method` is the RPC's name
  // in the service ("SubmitBackfill").
  grpc::Status Admit(const grpc::ServerContext& context,
                     std::string_view method) const;
  absl::Status Admit(const CallCredentials& credentials,
                     std::string_view method) const;

  // The credentials of a gRPC call.
  CallCredentials CredentialsOf(const grpc::ServerContext& context) const;

 private:
  void CountRefusal(std::string_view method, grpc::StatusCode code) const;
  // The Common Name of the call's verified client certificate, if the port
  // verifies them and the call has one.
  std::optional<std::string> CertificateName(
      const grpc::ServerContext& context) const;

  // The token set in force (a snapshot per call).
  std::shared_ptr<const BearerTokens> Tokens() const;

  const bool enabled_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const BearerTokens> tokens_ ABSL_GUARDED_BY(mu_);
  const bool client_certificates_;
  prometheus::Family<prometheus::Counter>* refusals_ = nullptr;
};

// The token of an "authorization" value "Bearer <token>" (the
// scheme in any case, spaces around the token ignored); INVALID_ARGUMENT
// saying the expected form otherwise. Exposed for tests.
absl::StatusOr<std::string_view> BearerTokenOf(std::string_view header);

}  // namespace backfill

#endif  // BACKFILL_SERVER_CALL_AUTH_H_
