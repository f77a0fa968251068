// diff_format: backfillctl's rendering of a job's diff (`diff`): per
// dataset its totals and measure deltas, a table PARTITION BEFORE AFTER
// ADDED REMOVED CHANGED UNCHANGED <measure> delta..., then the sample rows.
// A dataset's totals line is also part of a job's block
// (client/job_format.h).
//
// Pure functions from messages to text; thread-safe.

#ifndef BACKFILL_CLIENT_DIFF_FORMAT_H_
#define BACKFILL_CLIENT_DIFF_FORMAT_H_

#include <string>

#include "backfill/v1/backfill.pb.h"

namespace backfill {
namespace cli {

// "30 partitions, 30 changed; rows 120 -> 118: +0 added, -2 removed,
// ~116 changed, 2 unchanged; revenue -345.67 (12000 -> 11654.33)".
std::string DiffTotalsText(const v1::DatasetDiff& diff);

// The whole diff of a job (every page merged into one response).
std::string FormatDiff(const v1::DiffBackfillResponse& response);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_DIFF_FORMAT_H_
