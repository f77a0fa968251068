// BearerTokens: the principals a daemon knows and how their bearer tokens
// are recognised, loaded from the token file (`backfilld --auth-tokens
// FILE`). The file holds no token, only each token's SHA-256:
//
//   tokens:
//     - {principal: vera, roles: [viewer], sha256: <64 hex digits>}
//     - {principal: olivia, roles: [operator, approver], sha256: <...>}
//
// (`printf %s "$TOKEN" | sha256sum` gives the digest). An entry may also,
// or instead, say `client_certificate: true`: then a client whose verified
// TLS certificate has the principal as its Common Name signs in as it (with
// `backfilld --tls-client-ca`). A token is any
// non-empty text of printable ASCII, at most 4096 bytes; a generated one
// (32 random bytes, hex or base64url) is what it is meant for, since the
// file's digests are unsalted and only a long random token makes them
// useless to whoever reads the file.
//
// Loading checks everything and refuses the whole file, naming the entry
// and line, on any problem: an unknown key (a typo would otherwise drop a
// check), a missing or unknown role, a digest that is not 64 hex digits,
// the same digest twice (one token, two principals), no entry at all (a
// daemon that lets no one in is a mistake, not a policy).
//
// Lookup compares the presented token's digest with every entry in
// constant time per entry, so the time taken does not say how close a guess
// came.
//
// Immutable after loading; thread-safe.

#ifndef BACKFILL_SERVER_BEARER_TOKENS_H_
#define BACKFILL_SERVER_BEARER_TOKENS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/sha256_digest.h"
#include "server/access_policy.h"

namespace backfill {

// The longest token accepted (metadata values are limited anyway).
inline constexpr size_t kMaxTokenBytes = 4096;
// The longest principal name a token file may give.
inline constexpr size_t kMaxPrincipalBytes = 128;

class BearerTokens {
 public:
  // Parses the YAML text of a token file; `source` names it in errors
  // ("tokens.yaml:4: tokens[1]: ..."). INVALID_ARGUMENT on any problem.
  static absl::StatusOr<BearerTokens> Parse(std::string_view text,
                                            const std::string& source);

  // Reads and parses the file at `path`: NOT_FOUND or PERMISSION_DENIED
  // when it cannot be read, else as Parse().
  static absl::StatusOr<BearerTokens> Load(const std::string& path);

  // The principal `token` belongs to; nullopt for an unknown token, and for
  // one that is empty, longer than kMaxTokenBytes or not printable ASCII.
  std::optional<Principal> Find(std::string_view token) const;

  // The principal a verified client certificate with Common Name
  // `common_name` signs in as: that of the entry with this principal and
  // `client_certificate: true`; nullopt when there is none.
  std::optional<Principal> FindCertificateHolder(
      std::string_view common_name) const;

  // Whether some entry lets a principal sign in with a client certificate.
  bool has_certificate_principals() const;

  // How many tokens the file gives.
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::optional<Sha256Digest> digest;  // none: certificate only
    bool client_certificate = false;
    Principal principal;
  };

  explicit BearerTokens(std::vector<Entry> entries)
      : entries_(std::move(entries)) {}

  std::vector<Entry> entries_;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_BEARER_TOKENS_H_
