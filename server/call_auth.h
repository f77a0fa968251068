// CallAuth: who is calling an RPC of backfill.v1.BackfillService, and
// whether they may. The service asks it for every call before the request
// is even parsed (server/raw_request.h), so that a caller without the right
// credentials gets nothing from the daemon but a refusal.
//
// With a token file (`--auth-tokens`), a call must carry the metadata
//   authorization: Bearer <token>
// whose token the file knows (core/bearer_tokens.h), and the principal it
// names must hold a role that allows the method (core/access_policy.h):
//   no authorization metadata, or not "Bearer <token>"  UNAUTHENTICATED
//   a token the file does not know                       UNAUTHENTICATED
//   a principal whose roles do not allow the method      PERMISSION_DENIED
// Each refusal is counted,
//   backfill_auth_refusals_total{grpc_method, grpc_code}  counter
// and logged with the method, the peer and (for PERMISSION_DENIED) the
// principal; never with the token. Without a token file, every call is
// admitted and has no principal.
//
// The health and reflection services are not BackfillService's and are
// never asked about: probes and tools need them without credentials, and
// they reveal nothing a token protects.
//
// Holds the token set (shared, immutable) and borrows the registry, which
// must outlive it. Thread-safe: every method may be called concurrently.

#ifndef BACKFILL_SERVER_CALL_AUTH_H_
#define BACKFILL_SERVER_CALL_AUTH_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/access_policy.h"
#include "core/bearer_tokens.h"
#include "grpcpp/grpcpp.h"

namespace prometheus {
class Counter;
template <typename T>
class Family;
class Registry;
}  // namespace prometheus

namespace backfill {

class CallAuth {
 public:
  // `tokens` null: authentication off. `registry` null: refusals are not
  // counted (tests).
  CallAuth(std::shared_ptr<const BearerTokens> tokens,
           prometheus::Registry* registry);

  CallAuth(const CallAuth&) = delete;
  CallAuth& operator=(const CallAuth&) = delete;

  bool enabled() const { return tokens_ != nullptr; }

  // The principal of the call: nullopt when authentication is off,
  // UNAUTHENTICATED (saying what is missing or wrong) when its credentials
  // do not name one.
  absl::StatusOr<std::optional<Principal>> Authenticate(
      const grpc::ServerContext& context) const;

  // Authenticate() and then MayCall(principal, method): OK to go on, or the
  // refusal to answer with (counted and logged). `method` is the RPC's name
  // in the service ("SubmitBackfill").
  grpc::Status Admit(const grpc::ServerContext& context,
                     std::string_view method) const;

 private:
  void CountRefusal(std::string_view method, grpc::StatusCode code) const;

  const std::shared_ptr<const BearerTokens> tokens_;
  prometheus::Family<prometheus::Counter>* refusals_ = nullptr;
};

// The token of an "authorization" metadata value "Bearer <token>" (the
// scheme in any case, spaces around the token ignored); INVALID_ARGUMENT
// saying the expected form otherwise. Exposed for tests.
absl::StatusOr<std::string_view> BearerTokenOf(std::string_view header);

}  // namespace backfill

#endif  // BACKFILL_SERVER_CALL_AUTH_H_
