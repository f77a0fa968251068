// BasicAuthCredentials: the one user name and password an HTTP endpoint
// (backfilld's /metrics, `--metrics-basic-auth FILE`) accepts with HTTP
// basic auth, loaded from a YAML file that holds the password's SHA-256,
// never the password:
//
//   username: prometheus
//   sha256: <64 hex digits>    # printf %s "$PASSWORD" | sha256sum
//
// Loading checks everything and refuses the whole file, naming the line,
// on any problem: an unknown key, a missing username or sha256, a user
// name that basic auth cannot carry (empty, a ':', not printable ASCII,
// longer than kMaxBasicAuthUserBytes), a digest that is not 64 hex digits.
//
// Matches() hashes what it is given and compares both the user name and
// the password digest in constant time, whichever differs, so the time it
// takes does not say how close a guess came. The digest is unsalted: a
// long random password (e.g. 32 random bytes in hex) makes it useless to
// whoever reads the file.
//
// Immutable after loading; thread-safe.

#ifndef BACKFILL_SERVER_BASIC_AUTH_CREDENTIALS_H_
#define BACKFILL_SERVER_BASIC_AUTH_CREDENTIALS_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/base/sha256_digest.h"

namespace backfill {

inline constexpr size_t kMaxBasicAuthUserBytes = 128;

class BasicAuthCredentials {
 public:
  // Parses the YAML text of a credentials file; `source` names it in
  // errors ("metrics-auth.yaml:2: ..."). INVALID_ARGUMENT on any problem.
  static absl::StatusOr<BasicAuthCredentials> Parse(std::string_view text,
                                                    const std::string& source);

  // Reads and parses the file at `path`: NOT_FOUND or PERMISSION_DENIED
  // when it cannot be read, else as Parse().
  static absl::StatusOr<BasicAuthCredentials> Load(const std::string& path);

  // Whether `username` and `password` are the ones the file gives.
  bool Matches(std::string_view username, std::string_view password) const;

  const std::string& username() const { return username_; }

 private:
  BasicAuthCredentials(std::string username, Sha256Digest password_digest)
      : username_(std::move(username)),
        username_digest_(Sha256Of(username_)),
        password_digest_(password_digest) {}

  std::string username_;
  Sha256Digest username_digest_;
  Sha256Digest password_digest_;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_BASIC_AUTH_CREDENTIALS_H_
