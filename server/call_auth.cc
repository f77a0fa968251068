#include "server/call_auth.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/error_details.h"
#include "grpc/grpc_security_constants.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"
#include "server/grpc_metrics.h"
#include "server/grpc_status.h"
#include "server/log_text.h"
#include "spdlog/spdlog.h"

namespace backfill {
namespace {

constexpr std::string_view kAuthorization = "authorization";
constexpr std::string_view kBearer = "bearer";

// The bytes of a gRPC metadata value, as a std::string_view.
std::string_view MetadataView(grpc::string_ref ref) {
  return std::string_view(ref.data(), ref.size());
}

// `text` without the ASCII spaces and tabs around it.
std::string_view Trimmed(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

}  // namespace

absl::StatusOr<std::string_view> BearerTokenOf(std::string_view header) {
  std::string_view value = Trimmed(header);
  const bool bearer =
      value.size() > kBearer.size() && value[kBearer.size()] == ' ' &&
      absl::EqualsIgnoreCase(absl::string_view(value.data(), kBearer.size()),
                             absl::string_view(kBearer.data(), kBearer.size()));
  if (!bearer) {
    return absl::InvalidArgumentError(
        "the authorization value must be \"Bearer <token>\"");
  }
  value = Trimmed(value.substr(kBearer.size()));
  if (value.empty()) {
    return absl::InvalidArgumentError(
        "the authorization value holds \"Bearer\" without a token");
  }
  return value;
}

CallAuth::CallAuth(std::shared_ptr<const BearerTokens> tokens,
                   prometheus::Registry* registry, bool client_certificates)
    : enabled_(tokens != nullptr),
      tokens_(std::move(tokens)),
      client_certificates_(client_certificates) {
  if (registry != nullptr) {
    refusals_ = &prometheus::BuildCounter()
                     .Name("backfill_auth_refusals_total")
                     .Help(
                         "Calls refused for missing or unknown credentials "
                         "(UNAUTHENTICATED) or a role that does not allow "
                         "the method (PERMISSION_DENIED), by method")
                     .Register(*registry);
  }
}

std::shared_ptr<const BearerTokens> CallAuth::Tokens() const {
  absl::MutexLock lock(&mu_);
  return tokens_;
}

absl::Status CallAuth::ReplaceTokens(
    std::shared_ptr<const BearerTokens> tokens) {
  if (!enabled_) {
    return absl::FailedPreconditionError(
        "authentication is off (backfilld started without --auth-tokens)");
  }
  if (tokens == nullptr) {
    return absl::FailedPreconditionError("no token set given");
  }
  std::shared_ptr<const BearerTokens> previous;
  absl::MutexLock lock(&mu_);
  previous = std::exchange(tokens_, std::move(tokens));
  return absl::OkStatus();
}

CallCredentials CallAuth::CredentialsOf(
    const grpc::ServerContext& context) const {
  CallCredentials credentials;
  const auto& metadata = context.client_metadata();
  const auto [first, last] = metadata.equal_range(
      grpc::string_ref(kAuthorization.data(), kAuthorization.size()));
  for (auto it = first; it != last; ++it) {
    credentials.authorization.emplace_back(MetadataView(it->second));
  }
  credentials.certificate_name = CertificateName(context);
  credentials.peer = context.peer();
  return credentials;
}

absl::StatusOr<std::optional<Principal>> CallAuth::Authenticate(
    const grpc::ServerContext& context) const {
  return Authenticate(CredentialsOf(context));
}

absl::StatusOr<std::optional<Principal>> CallAuth::Authenticate(
    const CallCredentials& credentials) const {
  const std::shared_ptr<const BearerTokens> tokens = Tokens();
  if (credentials.authorization.empty() || tokens == nullptr) {
    // No token: the client certificate, when the port asks for one.
    const std::optional<std::string>& subject = credentials.certificate_name;
    if (subject.has_value()) {
      if (tokens == nullptr) return Principal{*subject, {}};
      std::optional<Principal> holder = tokens->FindCertificateHolder(*subject);
      if (holder.has_value()) return holder;
      return WithReason(
          absl::UnauthenticatedError(absl::StrCat(
              "the client certificate's Common Name \"", *subject,
              "\" is no principal of this backfilld's token file (an entry "
              "with client_certificate: true), and the call carries no "
              "bearer token")),
          "CERTIFICATE_PRINCIPAL_UNKNOWN");
    }
    if (tokens == nullptr) return std::optional<Principal>();
    return WithReason(
        absl::UnauthenticatedError(
            "this backfilld requires a bearer token: send \"authorization: "
            "Bearer <token>\" with every call (gRPC metadata or HTTP "
            "header)"),
        "CREDENTIALS_MISSING");
  }
  if (credentials.authorization.size() > 1) {
    return WithReason(
        absl::UnauthenticatedError(
            "the call carries more than one authorization value; send "
            "exactly one \"authorization: Bearer <token>\""),
        "CREDENTIALS_MALFORMED");
  }
  absl::StatusOr<std::string_view> token =
      BearerTokenOf(credentials.authorization.front());
  if (!token.ok()) {
    return WithReason(absl::UnauthenticatedError(token.status().message()),
                      "CREDENTIALS_MALFORMED");
  }
  std::optional<Principal> principal = tokens->Find(*token);
  if (!principal.has_value()) {
    return WithReason(
        absl::UnauthenticatedError(
            "the bearer token is not one this backfilld knows (its token "
            "file has no entry with its SHA-256); ask its administrator for "
            "a token"),
        "TOKEN_UNKNOWN");
  }
  return principal;
}

grpc::Status CallAuth::Admit(const grpc::ServerContext& context,
                             std::string_view method) const {
  if (!enabled_) return grpc::Status::OK;
  return ToGrpcStatus(Admit(CredentialsOf(context), method));
}

absl::Status CallAuth::Admit(const CallCredentials& credentials,
                             std::string_view method) const {
  if (!enabled_) return absl::OkStatus();
  absl::StatusOr<std::optional<Principal>> who = Authenticate(credentials);
  if (!who.ok()) {
    CountRefusal(method, grpc::StatusCode::UNAUTHENTICATED);
    spdlog::warn("refused {} from {}: {}", std::string(method),
                 LogText(credentials.peer),
                 std::string(who.status().message()));
    return who.status();
  }
  const Principal& principal = **who;
  if (MayCall(principal, method)) return absl::OkStatus();
  const std::optional<Role> needed = RequiredRole(method);
  const std::string role(RoleName(needed.value_or(Role::kAdmin)));
  const std::string message =
      absl::StrCat("principal ", principal.name,
                   " (roles: ", RoleList(principal.roles), ") may not call ",
                   std::string(method), ": it requires the ", role, " role");
  CountRefusal(method, grpc::StatusCode::PERMISSION_DENIED);
  spdlog::warn("refused {} from {}: {}", std::string(method),
               LogText(credentials.peer), message);
  return WithReason(absl::PermissionDeniedError(message), "ROLE_REQUIRED",
                    {{"method", std::string(method)},
                     {"required_role", role},
                     {"principal", principal.name}});
}

std::optional<std::string> CallAuth::CertificateName(
    const grpc::ServerContext& context) const {
  if (!client_certificates_) return std::nullopt;
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return std::nullopt;
  std::vector<grpc::string_ref> names =
      auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
  if (names.size() != 1 || names[0].empty()) return std::nullopt;
  return std::string(names[0].data(), names[0].size());
}

void CallAuth::CountRefusal(std::string_view method,
                            grpc::StatusCode code) const {
  if (refusals_ == nullptr) return;
  // `method` is one of the service's: the labels stay bounded.
  refusals_
      ->Add({{"grpc_method", std::string(method)},
             {"grpc_code", GrpcCodeName(code)}})
      .Increment();
}

}  // namespace backfill
