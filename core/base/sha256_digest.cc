#include "core/base/sha256_digest.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace backfill {

Sha256Digest Sha256Of(std::string_view text) {
  Sha256Digest digest{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
         digest.data());
  return digest;
}

std::string HexDigest(const Sha256Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : digest) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

absl::StatusOr<Sha256Digest> ParseHexDigest(std::string_view hex,
                                            std::string_view secret) {
  Sha256Digest digest{};
  if (hex.size() != 2 * digest.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sha256 must be 64 hex digits (the SHA-256 of the ",
                     std::string(secret), ", as sha256sum prints it), not ",
                     hex.size(), " characters"));
  }
  for (size_t i = 0; i < digest.size(); ++i) {
    int byte = 0;
    for (char c : hex.substr(2 * i, 2)) {
      const char l = absl::ascii_tolower(c);
      int v;
      if (l >= '0' && l <= '9') {
        v = l - '0';
      } else if (l >= 'a' && l <= 'f') {
        v = l - 'a' + 10;
      } else {
        return absl::InvalidArgumentError(
            "sha256 must be 64 hex digits (0-9, a-f)");
      }
      byte = byte * 16 + v;
    }
    digest[i] = static_cast<uint8_t>(byte);
  }
  return digest;
}

bool SameDigest(const Sha256Digest& a, const Sha256Digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace backfill
