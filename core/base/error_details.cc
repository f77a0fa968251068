#include "core/base/error_details.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace backfill {
namespace {

// Payload type URLs. Each metadata entry and each violation is a payload of
// its own, keyed by its name, so attaching one never re-encodes the others;
// violations carry their order of attachment in front of the description.
constexpr absl::string_view kReasonUrl = "backfilld.error/reason";
constexpr absl::string_view kMetadataPrefix = "backfilld.error/metadata/";
constexpr absl::string_view kViolationPrefix = "backfilld.error/field/";

std::string ViolationUrl(absl::string_view field) {
  return absl::StrCat(kViolationPrefix, field);
}

// "<ordinal>\n<description>".
std::pair<int, std::string> SplitViolation(const std::string& payload) {
  size_t newline = payload.find('\n');
  if (newline == std::string::npos) return {0, payload};
  int ordinal = 0;
  if (!absl::SimpleAtoi(absl::string_view(payload).substr(0, newline),
                        &ordinal)) {
    ordinal = 0;
  }
  return {ordinal, payload.substr(newline + 1)};
}

int ViolationCount(const absl::Status& status) {
  int count = 0;
  status.ForEachPayload([&](absl::string_view url, const absl::Cord&) {
    if (absl::StartsWith(url, kViolationPrefix)) ++count;
  });
  return count;
}

}  // namespace

absl::Status WithReason(absl::Status status, absl::string_view reason,
                        const std::map<std::string, std::string>& metadata) {
  if (status.ok()) return status;
  std::vector<std::string> stale;
  status.ForEachPayload([&](absl::string_view url, const absl::Cord&) {
    if (absl::StartsWith(url, kMetadataPrefix)) stale.emplace_back(url);
  });
  for (const std::string& url : stale) status.ErasePayload(url);
  status.SetPayload(kReasonUrl, absl::Cord(std::string(reason)));
  for (const auto& [key, value] : metadata) {
    status.SetPayload(absl::StrCat(kMetadataPrefix, key), absl::Cord(value));
  }
  return status;
}

absl::Status WithFieldViolation(absl::Status status, absl::string_view field,
                                absl::string_view description) {
  if (status.ok()) return status;
  const std::string url = ViolationUrl(field);
  auto earlier = status.GetPayload(url);
  int ordinal = earlier.has_value()
                    ? SplitViolation(std::string(*earlier)).first
                    : ViolationCount(status);
  status.SetPayload(url, absl::Cord(absl::StrCat(ordinal, "\n", description)));
  return status;
}

absl::Status InvalidFieldError(absl::string_view field,
                               absl::string_view reason,
                               absl::string_view message) {
  return WithFieldViolation(
      WithReason(absl::InvalidArgumentError(message), reason), field, message);
}

ErrorDetails DetailsOf(const absl::Status& status) {
  ErrorDetails details;
  if (status.ok()) return details;
  std::vector<std::pair<int, FieldViolation>> violations;
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    if (url == kReasonUrl) {
      details.reason = std::string(payload);
    } else if (absl::StartsWith(url, kMetadataPrefix)) {
      details.metadata[std::string(url.substr(kMetadataPrefix.size()))] =
          std::string(payload);
    } else if (absl::StartsWith(url, kViolationPrefix)) {
      auto [ordinal, description] = SplitViolation(std::string(payload));
      violations.push_back(
          {ordinal,
           {std::string(url.substr(kViolationPrefix.size())), description}});
    }
  });
  std::stable_sort(
      violations.begin(), violations.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [ordinal, violation] : violations) {
    details.field_violations.push_back(std::move(violation));
  }
  return details;
}

absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  // Back up over UTF-8 continuation bytes (10xxxxxx) to a character start.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  return text.substr(0, cut);
}

absl::Status PrefixFieldPaths(absl::Status status, absl::string_view prefix,
                              const std::vector<absl::string_view>& top_level) {
  if (status.ok()) return status;
  const std::string dotted = absl::StrCat(prefix, ".");
  std::vector<std::pair<std::string, absl::Cord>> renamed;
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    if (!absl::StartsWith(url, kViolationPrefix)) return;
    std::string field(url.substr(kViolationPrefix.size()));
    if (absl::StartsWith(field, dotted)) return;
    for (absl::string_view top : top_level) {
      if (field == top) return;
    }
    renamed.push_back({field, payload});
  });
  for (const auto& [field, payload] : renamed) {
    status.ErasePayload(ViolationUrl(field));
    status.SetPayload(ViolationUrl(absl::StrCat(dotted, field)), payload);
  }
  return status;
}

}  // namespace backfill
