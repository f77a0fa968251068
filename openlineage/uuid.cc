#include "openlineage/uuid.h"

#include <openssl/evp.h>

#include <cstring>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace backfill::openlineage {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string FormatUuid(const Uuid& uuid) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(kHex[uuid[i] >> 4]);
    out.push_back(kHex[uuid[i] & 0x0f]);
  }
  return out;
}

absl::StatusOr<Uuid> ParseUuid(std::string_view text) {
  Uuid uuid{};
  size_t byte = 0;
  bool ok = text.size() == 36;
  for (size_t i = 0; ok && i < text.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      ok = text[i] == '-';
      continue;
    }
    const int hi = HexDigit(text[i]);
    const int lo = i + 1 < text.size() ? HexDigit(text[i + 1]) : -1;
    ok = hi >= 0 && lo >= 0 && byte < uuid.size();
    if (ok) uuid[byte++] = static_cast<uint8_t>(hi << 4 | lo);
    ++i;
  }
  if (!ok || byte != uuid.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", absl::CEscape(std::string(text)),
                     "\" is not a UUID (expected "
                     "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx in hex)"));
  }
  return uuid;
}

Uuid NameBasedUuid(const Uuid& name_space, std::string_view name) {
  std::string input(reinterpret_cast<const char*>(name_space.data()),
                    name_space.size());
  input.append(name.data(), name.size());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // SHA-1 of a byte string in memory cannot fail short of memory
  // exhaustion, which aborts anyway.
  EVP_Digest(input.data(), input.size(), digest, &length, EVP_sha1(), nullptr);
  Uuid uuid{};
  std::memcpy(uuid.data(), digest, uuid.size());
  uuid[6] = static_cast<uint8_t>((uuid[6] & 0x0f) | 0x50);  // version 5
  uuid[8] = static_cast<uint8_t>((uuid[8] & 0x3f) | 0x80);  // RFC 4122
  return uuid;
}

}  // namespace backfill::openlineage
