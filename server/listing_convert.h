// Conversions for the paged lists of jobs and of a job's partitions
// (ListBackfills, ListPartitions) between the domain
// (core/governance/job_listing.h) and the backfill.v1 wire messages, with the
// wire-level checks of their requests and the cap on a page's size on the wire.
//
// Pure functions over values; they own nothing and keep no state, so they
// are thread-safe. The Catalog argument is only read and must outlive the
// call.

#ifndef BACKFILL_SERVER_LISTING_CONVERT_H_
#define BACKFILL_SERVER_LISTING_CONVERT_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "backfill/v1/backfill.pb.h"
#include "core/governance/job_listing.h"
#include "core/model/catalog.h"

namespace backfill {

// ListBackfills page sizes.
inline constexpr int kDefaultPageSize = 50;
inline constexpr int kMaxPageSize = 1000;
// ListPartitions page sizes.
inline constexpr int kDefaultPartitionPageSize = 100;
inline constexpr int kMaxPartitionPageSize = 1000;

// At most about this many bytes of jobs or partitions per page, half of the
// 4 MiB a gRPC client receives by default: a page over a client's limit
// would fail on every retry. A page always holds its first item, however
// large.
inline constexpr size_t kMaxListPageBytes = 2 << 20;

// The query a ListBackfillsRequest asks for. INVALID_ARGUMENT, naming the
// field, for a negative page_size, a state that is UNSPECIFIED or unknown,
// or a view that is no BackfillView. A page_size over kMaxPageSize is served
// as kMaxPageSize (AIP-158); UNSPECIFIED view: BASIC. The page token is
// checked when the page is read (core/governance/job_listing.h).
absl::StatusOr<JobPageQuery> JobPageQueryFromProto(
    const v1::ListBackfillsRequest& request);

// The page's jobs in `query.view` while their encoded size stays within
// `max_bytes` (at least one job). When jobs are left out for size, the next
// page token is the one after the last job returned; else the page's own.
v1::ListBackfillsResponse JobPageToProto(const JobPage& page,
                                         const JobPageQuery& query,
                                         const Catalog& catalog,
                                         size_t max_bytes = kMaxListPageBytes);

// The query a ListPartitionsRequest asks for. INVALID_ARGUMENT, naming the
// field, for a backfill_id that is not "bf-<number>", a negative page_size
// or a state that is UNSPECIFIED or unknown. A page_size over
// kMaxPartitionPageSize is served as kMaxPartitionPageSize.
absl::StatusOr<PartitionPageQuery> PartitionPageQueryFromProto(
    const v1::ListPartitionsRequest& request);

// As JobPageToProto, for partitions.
v1::ListPartitionsResponse PartitionPageToProto(
    const PartitionPage& page, const PartitionPageQuery& query,
    size_t max_bytes = kMaxListPageBytes);

}  // namespace backfill

#endif  // BACKFILL_SERVER_LISTING_CONVERT_H_
