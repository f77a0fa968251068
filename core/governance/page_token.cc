#include "core/governance/page_token.h"

#include <xxhash.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/base/error_details.h"

namespace backfill {
namespace {

// Layout of a decoded token (22 bytes, big-endian numbers):
//   [0]      version (kVersion)
//   [1]      list (PageList)
//   [2, 10)  filter hash
//   [10, 18) position
//   [18, 22) checksum: the low 32 bits of XXH3 of bytes [0, 18)
constexpr uint8_t kVersion = 1;
constexpr size_t kBodySize = 18;
constexpr size_t kTokenSize = kBodySize + 4;
constexpr uint64_t kChecksumSeed = 0x70616765;  // "page"
// Tokens longer than this are not read at all.
constexpr size_t kMaxTokenText = 64;
// A token with a text key (EncodePageTokenAfter):
//   [0]       version (kKeyVersion)
//   [1]       list
//   [2, 10)   filter hash
//   [10, n-4) key
//   [n-4, n)  checksum of bytes [0, n-4)
constexpr uint8_t kKeyVersion = 2;
constexpr size_t kKeyHeader = 10;
constexpr size_t kMaxKeyTokenText =
    4 * ((kKeyHeader + kMaxPageTokenKey + 4 + 2) / 3);

void PutUint(uint64_t value, int bytes, std::string* out) {
  for (int i = bytes - 1; i >= 0; --i) {
    out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

uint64_t GetUint(std::string_view in, size_t at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value = (value << 8) | static_cast<uint8_t>(in[at + i]);
  }
  return value;
}

uint32_t Checksum(std::string_view body) {
  return static_cast<uint32_t>(
      XXH3_64bits_withSeed(body.data(), body.size(), kChecksumSeed));
}

absl::string_view Absl(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}

const char* ListName(PageList list) {
  switch (list) {
    case PageList::kJobs:
      return "ListBackfills";
    case PageList::kPartitions:
      return "ListPartitions";
    case PageList::kDiff:
      return "DiffBackfill";
    case PageList::kAudit:
      return "ListAuditEvents";
    case PageList::kDatasetPartitions:
      return "ListDatasetPartitions";
  }
  return "the list";
}

absl::Status InvalidToken(std::string message) {
  return InvalidFieldError("page_token", "PAGE_TOKEN_INVALID", message);
}

absl::Status NotAToken(PageList list, std::string_view token) {
  std::string shown(token.substr(0, kMaxTokenText));
  if (token.size() > kMaxTokenText) shown += "...";
  return InvalidToken(absl::StrCat(
      "`page_token` \"", absl::CHexEscape(shown), "\" is not a token `",
      ListName(list),
      "` returned (it is damaged, cut or from another list): pass "
      "next_page_token of the previous page unchanged, or no `page_token` "
      "for the first page"));
}

absl::Status OtherFilters(std::string_view filter_names) {
  return InvalidToken(absl::StrCat(
      "`page_token` was returned for other filters: send the same ",
      Absl(filter_names),
      " as the request that returned it, or no `page_token` to start again "
      "from the first page"));
}

}  // namespace

uint64_t FilterHash(PageList list, const std::vector<std::string>& filters) {
  // Each filter length-prefixed, so that no two lists of texts encode alike.
  std::string text(1, static_cast<char>(list));
  for (const std::string& f : filters) {
    PutUint(f.size(), 8, &text);
    text += f;
  }
  return XXH3_64bits(text.data(), text.size());
}

std::string EncodePageToken(PageList list, uint64_t filter_hash,
                            int64_t position) {
  std::string bytes;
  bytes.push_back(static_cast<char>(kVersion));
  bytes.push_back(static_cast<char>(list));
  PutUint(filter_hash, 8, &bytes);
  PutUint(static_cast<uint64_t>(position), 8, &bytes);
  PutUint(Checksum(bytes), 4, &bytes);
  return absl::WebSafeBase64Escape(bytes);
}

absl::StatusOr<int64_t> DecodePageToken(PageList list, std::string_view token,
                                        uint64_t filter_hash,
                                        std::string_view filter_names,
                                        int64_t min_position) {
  std::string bytes;
  if (token.size() > kMaxTokenText ||
      !absl::WebSafeBase64Unescape(Absl(token), &bytes) ||
      bytes.size() != kTokenSize ||
      // One spelling only: no padding, whitespace or other variants.
      absl::WebSafeBase64Escape(bytes) != token) {
    return NotAToken(list, token);
  }
  const std::string_view view(bytes);
  if (static_cast<uint8_t>(view[0]) != kVersion ||
      static_cast<uint8_t>(view[1]) != static_cast<uint8_t>(list) ||
      GetUint(view, kBodySize, 4) != Checksum(view.substr(0, kBodySize))) {
    return NotAToken(list, token);
  }
  const int64_t position = static_cast<int64_t>(GetUint(view, 10, 8));
  if (position < min_position) return NotAToken(list, token);
  if (GetUint(view, 2, 8) != filter_hash) return OtherFilters(filter_names);
  return position;
}

std::string EncodePageTokenAfter(PageList list, uint64_t filter_hash,
                                 std::string_view key) {
  std::string bytes;
  bytes.push_back(static_cast<char>(kKeyVersion));
  bytes.push_back(static_cast<char>(list));
  PutUint(filter_hash, 8, &bytes);
  bytes.append(key.substr(0, kMaxPageTokenKey));
  PutUint(Checksum(bytes), 4, &bytes);
  return absl::WebSafeBase64Escape(bytes);
}

absl::StatusOr<std::string> DecodePageTokenKey(PageList list,
                                               std::string_view token,
                                               uint64_t filter_hash,
                                               std::string_view filter_names) {
  std::string bytes;
  if (token.size() > kMaxKeyTokenText ||
      !absl::WebSafeBase64Unescape(Absl(token), &bytes) ||
      bytes.size() < kKeyHeader + 4 ||
      bytes.size() > kKeyHeader + kMaxPageTokenKey + 4 ||
      absl::WebSafeBase64Escape(bytes) != token) {
    return NotAToken(list, token);
  }
  const std::string_view view(bytes);
  const size_t body = bytes.size() - 4;
  if (static_cast<uint8_t>(view[0]) != kKeyVersion ||
      static_cast<uint8_t>(view[1]) != static_cast<uint8_t>(list) ||
      GetUint(view, body, 4) != Checksum(view.substr(0, body))) {
    return NotAToken(list, token);
  }
  if (GetUint(view, 2, 8) != filter_hash) return OtherFilters(filter_names);
  return std::string(view.substr(kKeyHeader, body - kKeyHeader));
}

}  // namespace backfill
