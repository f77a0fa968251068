// TokenFileText: the text of a bearer token file (server/bearer_tokens.h)
// that grants each principal its roles for its token. Only each token's
// SHA-256 is written, as an operator writes the file.
//
// Pure function; thread-safe.

#ifndef BACKFILL_TESTS_TESTING_TOKEN_FILE_H_
#define BACKFILL_TESTS_TESTING_TOKEN_FILE_H_

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/sha256_digest.h"

namespace backfill::testing {

struct TokenGrant {
  std::string principal;
  std::string roles;  // as in the file's list: "viewer", "operator, approver"
  std::string token;
};

inline std::string TokenFileText(const std::vector<TokenGrant>& grants) {
  std::string text = "tokens:\n";
  for (const TokenGrant& g : grants) {
    absl::StrAppend(&text, "  - {principal: ", g.principal, ", roles: [",
                    g.roles, "], sha256: ", HexDigest(Sha256Of(g.token)),
                    "}\n");
  }
  return text;
}

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_TOKEN_FILE_H_
