// SHA-256 digests of secrets (tokens, passwords) as the credential files
// store them: computed with OpenSSL, written and read as 64 lowercase or
// uppercase hex digits (as sha256sum prints them), and compared in constant
// time, so that the time a comparison takes does not say how close a guess
// came. Stateless functions; thread-safe.

#ifndef BACKFILL_CORE_BASE_SHA256_DIGEST_H_
#define BACKFILL_CORE_BASE_SHA256_DIGEST_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace backfill {

using Sha256Digest = std::array<uint8_t, 32>;

// The SHA-256 of `text`.
Sha256Digest Sha256Of(std::string_view text);

// Lowercase hex of `digest`.
std::string HexDigest(const Sha256Digest& digest);

// The digest written as 64 hex digits (either case); INVALID_ARGUMENT
// saying what is expected otherwise ("sha256 must be 64 hex digits (the
// SHA-256 of the `secret`, ..."; `secret` is "token", "password", ...).
absl::StatusOr<Sha256Digest> ParseHexDigest(std::string_view hex,
                                            std::string_view secret);

// Whether `a` and `b` are equal, in time that does not depend on where they
// differ.
bool SameDigest(const Sha256Digest& a, const Sha256Digest& b);

}  // namespace backfill

#endif  // BACKFILL_CORE_BASE_SHA256_DIGEST_H_
