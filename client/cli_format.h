// cli_format: the human and JSON renderings of backfill.v1 messages used by
// backfillctl. Pure functions from messages to text; nothing here talks to
// the network or writes to a stream, so every format is unit-testable.
// The renderings of single values they share (ToJson, TerminalText,
// timestamps, state names, numbers, counts, costs) are
// client/value_format.h, which this header includes.
//
// Text that comes from the server or from users (a job's message, reason,
// ticket, requested_by, dataset names, partition values, ids) goes through
// TerminalText() in every human format, so that it cannot move the cursor,
// recolour or clear the terminal, or break a line. JSON is exact: the
// protobuf JSON printer escapes by itself.
//
// Formats (all timestamps UTC ISO-8601, "-" when unset):
//   FormatDatasets   table NAME KIND GRAIN TABLE UPSTREAM DOWNSTREAM
//   FormatPlan       per-dataset table, total cost vs full reload, where
//                    each dataset's estimate comes from, the budgets and
//                    whether a submit would be refused for cost, why each
//                    partition is planned (grouped into ranges), conflicts
//                    (the jobs a submit would wait for)
//   FormatBackfill   "label  value" block describing one job (with its
//                    budget and each dataset's estimated and actual cost),
//                    then why each partition is planned
//   FormatBackfills  table ID STATE DATASET PARTITIONS COST EST/ACTUAL
//                    CREATED REASON
//   FormatPartitions table DATASET PARTITION STATE ATTEMPTS ROWS SECONDS
//                    UPDATED REASON ERROR, then the number of partitions
//   FormatDiff       per dataset its totals and measure deltas, a table
//                    PARTITION BEFORE AFTER ADDED REMOVED CHANGED UNCHANGED
//                    <measure> delta..., then the sample rows
//   FormatProgress*  the --wait/watch progress bar and plain progress lines
//
// Thread-safety: all functions are stateless and thread-safe.

#ifndef BACKFILL_CLIENT_CLI_FORMAT_H_
#define BACKFILL_CLIENT_CLI_FORMAT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "backfill/v1/backfill.pb.h"
#include "client/value_format.h"

namespace backfill {
namespace cli {

// Why each partition of a plan is there, one line per run of consecutive
// partitions (in the plan's order) with the same reason, each line starting
// with `indent`: "2025-06-01 .. 2025-06-30  requested (30)", a single
// partition as "2025-06  downstream of daily via rollup". At most
// `max_ranges` lines, then "... and N more ranges". "" when the plan has no
// partition_reasons (a job planned before they were kept).
std::string FormatPartitionReasons(const v1::DatasetPlan& plan,
                                   absl::string_view indent,
                                   int max_ranges = 12);

std::string FormatDatasets(const v1::ListDatasetsResponse& response);
std::string FormatPlan(const v1::PlanBackfillResponse& response);
std::string FormatBackfill(const v1::Backfill& backfill);
// The "Checks" section of FormatBackfill ("" without results): counts of
// checks passed, failed, held and warned, then each failing result (at most
// 10 per severity) with what was allowed and up to 2 sample rows.
std::string FormatChecks(const v1::Backfill& backfill);
// The "Consumers" block of `status`: what the job's latest confirmation
// found per downstream consumer ("" before any).
std::string FormatConfirmations(const v1::Backfill& backfill);
std::string FormatBackfills(const v1::ListBackfillsResponse& response);
// The partitions of a job (every page merged into one response).
std::string FormatPartitions(const v1::ListPartitionsResponse& response);
// The whole diff of a job (every page merged into one response).
std::string FormatDiff(const v1::DiffBackfillResponse& response);

// `[#########.........]  45%  135/300 partitions  RUNNING  12.3 s`, then
// `  ETA 3m20s` when the ETA is known and `  cost 1.2k/3000 input_rows`
// (read so far / estimated) once there is a cost (no trailing newline, no
// carriage return).
std::string FormatProgressBar(const v1::Backfill& backfill,
                              double elapsed_seconds, int bar_width = 20);

// FormatProgressBar narrowed to fit a terminal of `columns` columns (fewer
// than `columns` characters, so that a redraw never wraps): the bar shrinks
// to 5 characters first, then the end of the line is cut.
std::string FormatProgressBarFitting(const v1::Backfill& backfill,
                                     double elapsed_seconds, int columns);

// `job bf-1: RUNNING  135/300 partitions  45%  12.3 s[  ETA 3m20s]
// [  cost 1.2k/3000 input_rows][  now: CURRENT STEP][  (message)]`
std::string FormatProgressLine(const v1::Backfill& backfill,
                               double elapsed_seconds);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_CLI_FORMAT_H_
