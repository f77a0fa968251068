// freshness_format: the human rendering of `backfillctl freshness`
// (ListDatasetPartitions), how current each published partition of a
// derived dataset is, and the parsing of the freshness words its --only
// flag takes.
//
//   FormatDatasetPartitions  a summary line (how many partitions are
//                            published, how many current, stale, due for a
//                            replay and frozen, and the frozen rule), a
//                            line saying which replay policy evaluation the
//                            DUE standings come from, then a table
//                            PARTITION FRESHNESS VERSION WHEN ROWS HELD-BY
//                            WHY; one line saying so when nothing is
//                            published
//   ParseFreshness           "stale", "STALE" or "PARTITION_FRESHNESS_STALE"
//
// Pure functions from messages to text, like the other format units
// (client/cli_format.h): they own nothing, and text from the server goes
// through TerminalText(). Thread-safety: stateless and thread-safe.

#ifndef BACKFILL_CLIENT_FRESHNESS_FORMAT_H_
#define BACKFILL_CLIENT_FRESHNESS_FORMAT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backfill/v1/backfill.pb.h"

namespace backfill {
namespace cli {

// A dataset's published partitions (every page merged into one response).
// The counts are the response's, over the whole dataset, whatever
// partitions it lists.
std::string FormatDatasetPartitions(
    const v1::ListDatasetPartitionsResponse& response);

// Parses "current", "stale", "due" or "frozen", or the enum's full name
// ("PARTITION_FRESHNESS_STALE"), in any case. INVALID_ARGUMENT naming the
// accepted words otherwise (PARTITION_FRESHNESS_UNSPECIFIED included).
absl::StatusOr<v1::PartitionFreshness> ParseFreshness(absl::string_view text);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_FRESHNESS_FORMAT_H_
