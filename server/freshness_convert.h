// Conversions for ListDatasetPartitions between the domain
// (core/governance/dataset_freshness.h) and the backfill.v1 wire messages,
// with the wire-level checks of its request and its page tokens.
//
// Pure functions over values; they own nothing and keep no state, so they
// are thread-safe.

#ifndef BACKFILL_SERVER_FRESHNESS_CONVERT_H_
#define BACKFILL_SERVER_FRESHNESS_CONVERT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "backfill/v1/backfill.pb.h"
#include "core/governance/dataset_freshness.h"

namespace backfill {

// ListDatasetPartitions page sizes.
inline constexpr int kDefaultFreshnessPageSize = 100;
inline constexpr int kMaxFreshnessPageSize = 1000;

// The query a ListDatasetPartitionsRequest asks for, its page token
// decoded. INVALID_ARGUMENT, naming the field, for an empty dataset, a
// negative page_size, a freshness that is UNSPECIFIED or unknown, and a
// page token that is damaged or was returned for another dataset or
// freshness filter. A page_size over kMaxFreshnessPageSize is served as
// kMaxFreshnessPageSize.
absl::StatusOr<FreshnessQuery> FreshnessQueryFromProto(
    const v1::ListDatasetPartitionsRequest& request);

// The response for `page` of `query`; `evaluated_at` is when the policy's
// evaluation that DUE comes from ran (InfinitePast: none).
v1::ListDatasetPartitionsResponse FreshnessPageToProto(
    const FreshnessPage& page, const FreshnessQuery& query,
    absl::Time evaluated_at);

}  // namespace backfill

#endif  // BACKFILL_SERVER_FRESHNESS_CONVERT_H_
