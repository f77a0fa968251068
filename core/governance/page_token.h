// PageToken: the opaque page tokens of every list the API pages
// (ListBackfills, ListPartitions, DiffBackfill, ListAuditEvents,
// ListDatasetPartitions). A token names the list it belongs to, the filters
// of the request that returned it (as a hash) and a position: the sort key
// of the last item returned (a job number, a task ordinal, an audit event's
// sequence number, a partition value), so that the next page starts right
// after that item whatever was added since, or for a diff, which never
// changes once computed, the offset of the next page's first partition; a
// checksum makes a damaged or cut token fail to decode instead of being
// read as another position. Tokens are base64url text (no padding) and
// stay valid across restarts (every hash is XXH3, which is stable).
//
// A token is not a secret and not a signature: whoever makes one by hand
// can only ask for a page of a list they may read anyway.
//
// Pure functions over values; thread-safe.

#ifndef BACKFILL_CORE_GOVERNANCE_PAGE_TOKEN_H_
#define BACKFILL_CORE_GOVERNANCE_PAGE_TOKEN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace backfill {

// Which list a token belongs to: a token of one list is refused by another.
enum class PageList : uint8_t {
  kJobs = 'J',               // ListBackfills
  kPartitions = 'P',         // ListPartitions
  kDiff = 'D',               // DiffBackfill
  kAudit = 'A',              // ListAuditEvents
  kDatasetPartitions = 'F',  // ListDatasetPartitions
};

// A stable 64-bit hash of a request's filters, each given as text (their
// order matters: callers put them in a fixed order, sets sorted).
uint64_t FilterHash(PageList list, const std::vector<std::string>& filters);

// The token of the page that starts after the item at `position`.
std::string EncodePageToken(PageList list, uint64_t filter_hash,
                            int64_t position);

// The position a token of `list` carries. INVALID_ARGUMENT (reason
// PAGE_TOKEN_INVALID, a violation of the field "page_token") when `token` is
// not a token of `list` (not base64url, the wrong length or version, another
// list, a checksum that does not match, a position below `min_position`) and
// when it was returned for filters other than those of `filter_hash`: then the
// message says to send the filters of the request that returned it, which
// `filter_names` names (e.g. "states and dataset").
absl::StatusOr<int64_t> DecodePageToken(PageList list, std::string_view token,
                                        uint64_t filter_hash,
                                        std::string_view filter_names,
                                        int64_t min_position = 0);

// For a list sorted by text: the token of the page that starts after the
// item whose sort key is `key` (at most kMaxPageTokenKey bytes).
inline constexpr size_t kMaxPageTokenKey = 512;
std::string EncodePageTokenAfter(PageList list, uint64_t filter_hash,
                                 std::string_view key);

// The key a token of EncodePageTokenAfter carries; refused as
// DecodePageToken refuses a token.
absl::StatusOr<std::string> DecodePageTokenKey(PageList list,
                                               std::string_view token,
                                               uint64_t filter_hash,
                                               std::string_view filter_names);

}  // namespace backfill

#endif  // BACKFILL_CORE_GOVERNANCE_PAGE_TOKEN_H_
