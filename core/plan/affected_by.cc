#include "core/plan/affected_by.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/error_details.h"
#include "core/base/sv.h"
#include "core/model/partition_layout.h"

namespace backfill {
namespace {

constexpr size_t kQuotedBytes = 200;
constexpr size_t kMaxDatasetBytes = 256;

absl::Status Refuse(std::string_view predicate, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "affected_by: predicate ", QuotePredicate(predicate), " ", Sv(why)));
}

// Skips a quoted token starting at `i` (the opening quote) that ends with
// `close`, where a doubled `close` stands for itself when `doubled`. Returns
// the index after the token, or npos when it is not terminated.
size_t SkipQuoted(std::string_view s, size_t i, char close, bool doubled) {
  for (size_t j = i + 1; j < s.size(); ++j) {
    if (s[j] != close) continue;
    if (doubled && j + 1 < s.size() && s[j + 1] == close) {
      ++j;
      continue;
    }
    return j + 1;
  }
  return std::string_view::npos;
}

}  // namespace

std::string QuotePredicate(std::string_view predicate) {
  if (predicate.size() <= kQuotedBytes) {
    return absl::StrCat("\"", Sv(predicate), "\"");
  }
  return absl::StrCat("\"", Utf8Prefix(Sv(predicate), kQuotedBytes), "...\"");
}

absl::Status CheckPredicate(std::string_view predicate) {
  if (absl::StripAsciiWhitespace(Sv(predicate)).empty()) {
    return absl::InvalidArgumentError(
        "affected_by: the predicate is empty; give \"DATASET: PREDICATE\", "
        "e.g. \"orders: refund > 0\"");
  }
  if (predicate.size() > kMaxPredicateBytes) {
    return Refuse(predicate,
                  absl::StrCat("is ", predicate.size(), " bytes; at most ",
                               kMaxPredicateBytes));
  }
  for (size_t i = 0; i < predicate.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(predicate[i]);
    if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) {
      return Refuse(predicate,
                    absl::StrFormat("contains the control character 0x%02x at "
                                    "byte %d; only tab and newline are allowed",
                                    c, i));
    }
  }
  // One expression: the tokens that can hide parentheses and semicolons
  // (strings, quoted identifiers, comments) are skipped whole.
  int depth = 0;
  const std::string_view s = predicate;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    size_t next = i + 1;
    switch (c) {
      case '\'':
        next = SkipQuoted(s, i, '\'', true);
        if (next == std::string_view::npos) {
          return Refuse(predicate, "has a string literal that is not closed");
        }
        break;
      case '"':
        next = SkipQuoted(s, i, '"', true);
        if (next == std::string_view::npos) {
          return Refuse(predicate, "has a quoted name that is not closed");
        }
        break;
      case '`':
        next = SkipQuoted(s, i, '`', true);
        if (next == std::string_view::npos) {
          return Refuse(predicate, "has a quoted name that is not closed");
        }
        break;
      case '[':
        next = SkipQuoted(s, i, ']', false);
        if (next == std::string_view::npos) {
          return Refuse(predicate, "has a [quoted name] that is not closed");
        }
        break;
      case '-':
        if (i + 1 < s.size() && s[i + 1] == '-') {
          const size_t end = s.find('\n', i);
          next = end == std::string_view::npos ? s.size() : end + 1;
        }
        break;
      case '/':
        if (i + 1 < s.size() && s[i + 1] == '*') {
          const size_t end = s.find("*/", i + 2);
          if (end == std::string_view::npos) {
            return Refuse(predicate, "has a /* comment that is not closed");
          }
          next = end + 2;
        }
        break;
      case '(':
        ++depth;
        break;
      case ')':
        if (--depth < 0) {
          return Refuse(predicate,
                        "closes a parenthesis it did not open: it must be one "
                        "expression");
        }
        break;
      case ';':
        return Refuse(predicate,
                      "contains ';': it must be one expression, not "
                      "statements");
      default:
        break;
    }
    i = next;
  }
  if (depth != 0) {
    return Refuse(predicate, "leaves a parenthesis open");
  }
  return absl::OkStatus();
}

absl::StatusOr<AffectedBy> ParseAffectedBy(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "affected_by: ", QuotePredicate(text),
        " has no ':'; give \"DATASET: PREDICATE\", e.g. \"orders: refund "
        "> 0\""));
  }
  AffectedBy out;
  out.dataset =
      std::string(absl::StripAsciiWhitespace(Sv(text.substr(0, colon))));
  out.predicate =
      std::string(absl::StripAsciiWhitespace(Sv(text.substr(colon + 1))));
  if (out.dataset.empty()) {
    return absl::InvalidArgumentError(
        "affected_by: no dataset before ':'; give \"DATASET: PREDICATE\", "
        "e.g. \"orders: refund > 0\"");
  }
  if (out.dataset.size() > kMaxDatasetBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("affected_by: the dataset name is ", out.dataset.size(),
                     " bytes; at most ", kMaxDatasetBytes));
  }
  for (unsigned char c : out.dataset) {
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(
          "affected_by: the dataset name contains a control character");
    }
  }
  if (absl::Status s = CheckPredicate(out.predicate); !s.ok()) return s;
  return out;
}

std::string AffectedByText(const AffectedBy& affected_by) {
  return absl::StrCat(affected_by.dataset, ": ", affected_by.predicate);
}

absl::Status AddMatchingPartition(const DatasetSpec& dataset,
                                  std::string_view predicate,
                                  size_t max_partitions, std::string partition,
                                  std::set<std::string>* matching) {
  if (dataset.grain() == Grain::kKey &&
      std::find(dataset.partition->keys.begin(), dataset.partition->keys.end(),
                partition) == dataset.partition->keys.end()) {
    return absl::OkStatus();  // not a declared key: no partition
  }
  if (dataset.two_dimensional() &&
      !ValidatePartition(dataset.layout(), partition).ok()) {
    return absl::OkStatus();  // not a declared key: no partition
  }
  matching->insert(std::move(partition));
  if (matching->size() > max_partitions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "affected_by: more than ", max_partitions, " partitions of ",
        dataset.name, " have a row where ", QuotePredicate(predicate),
        "; at most ", max_partitions, " per backfill: narrow the predicate"));
  }
  return absl::OkStatus();
}

absl::Status PredicateRanTooLong(std::string_view predicate,
                                 absl::Duration timeout,
                                 std::string_view where) {
  return absl::InvalidArgumentError(absl::StrCat(
      "affected_by: predicate ", QuotePredicate(predicate), " ran longer than ",
      absl::FormatDuration(timeout), " over ", Sv(where),
      " and was stopped: make it cheaper (e.g. a condition on the table's "
      "own columns, without subqueries)"));
}

absl::Status PredicateRefused(std::string_view predicate, std::string_view why,
                              std::string_view where, std::string_view also) {
  return absl::InvalidArgumentError(absl::StrCat(
      "affected_by: predicate ", QuotePredicate(predicate), " is refused: it ",
      Sv(why), "; a predicate may only read the columns of ", Sv(where),
      " (and ", Sv(also), ")"));
}

absl::Status PredicateTooBig(std::string_view predicate, int64_t max_bytes,
                             std::string_view where) {
  return absl::InvalidArgumentError(absl::StrCat(
      "affected_by: predicate ", QuotePredicate(predicate), " over ", Sv(where),
      " made a value larger than ", max_bytes,
      " bytes and was stopped: a predicate may not build strings or blobs "
      "that large"));
}

absl::Status PredicateInterrupted(std::string_view predicate) {
  return absl::UnavailableError(absl::StrCat(
      "affected_by: evaluating predicate ", QuotePredicate(predicate),
      " was interrupted: the service is stopping"));
}

}  // namespace backfill
