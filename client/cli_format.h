// cli_format: the human and JSON renderings of backfill.v1 messages used by
// backfillctl. Pure functions from messages to text; nothing here talks to
// the network or writes to a stream, so every format is unit-testable.
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

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backfill/v1/backfill.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/timestamp.pb.h"

namespace backfill {
namespace cli {

// The message as protobuf JSON with the proto field names and every
// primitive field printed (so scripts see `created: false`, zero counts).
// Enums print as their names; int64 fields print as JSON strings (the
// proto3 JSON mapping).
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);

// `text` made safe to print on a terminal, on one line:
//   newline, CR, tab          -> "\n", "\r", "\t"
//   other bytes < 0x20, 0x7f  -> "\xNN" (ESC, so ANSI sequences, -> "\x1b")
//   bytes that are not UTF-8  -> "\xNN"
//   U+0080..U+009F (C1 controls, U+009B is a terminal's CSI), U+2028,
//   U+2029 (line and paragraph separators), U+200E, U+200F,
//   U+202A..U+202E, U+2066..U+2069 (bidirectional marks and overrides)
//                             -> "\uNNNN"
// Everything else is copied as it is, backslashes included, so that text in
// any language reads as it was written (text/display_text.h's DisplayText
// without escape_backslash). This is for reading, not a reversible
// encoding: --json has the exact text.
std::string TerminalText(absl::string_view text);

// "2025-03-01T12:34:56Z"; "-" when the timestamp is unset.
std::string FormatTimestamp(const google::protobuf::Timestamp& timestamp);

// "RUNNING" for BACKFILL_STATE_RUNNING.
std::string StateName(v1::BackfillState state);

// Parses "RUNNING", "running" or "BACKFILL_STATE_RUNNING" (any case).
// INVALID_ARGUMENT listing the accepted names otherwise.
absl::StatusOr<v1::BackfillState> ParseState(absl::string_view text);

// "STAGED" for PARTITION_STATE_STAGED.
std::string PartitionStateName(v1::PartitionState state);

// Parses "STAGED", "staged" or "PARTITION_STATE_STAGED" (any case).
// INVALID_ARGUMENT listing the accepted names otherwise.
absl::StatusOr<v1::PartitionState> ParsePartitionState(absl::string_view text);

// True for the states a job never leaves (SUCCEEDED, FAILED, CANCELLED,
// ROLLED_BACK, VALIDATION_FAILED, DOWNSTREAM_UNHEALTHY).
bool IsTerminal(v1::BackfillState state);
// True for a state that waits for an operator rather than for the service:
// AWAITING_APPROVAL (a follow stops there).
bool WaitsForOperator(v1::BackfillState state);

// A measure total or delta: "1234.5", "-12.25", integers without a point;
// with `sign`, "+" before a positive value.
std::string FormatNumber(double value, bool sign = false);

// Partitions done so far: staged + published + unchanged + skipped (the
// early cutoff settles the last two without publishing them).
int64_t DonePartitions(const v1::PartitionCounts& counts);

// "1234", "12.3k", "4.57M", "1.20G".
std::string HumanCount(double value);

// "2025-03-01..2025-03-07 (7)", the full list when there are at most
// `max_listed`, "(unpartitioned)" for the single "" partition. Partition
// values go through TerminalText().
std::string SummarizePartitions(
    const google::protobuf::RepeatedPtrField<std::string>& partitions,
    int max_listed = 4);

// Why each partition of a plan is there, one line per run of consecutive
// partitions (in the plan's order) with the same reason, each line starting
// with `indent`: "2025-06-01 .. 2025-06-30  requested (30)", a single
// partition as "2025-06  downstream of daily via rollup". At most
// `max_ranges` lines, then "... and N more ranges". "" when the plan has no
// partition_reasons (a job planned before they were kept).
std::string FormatPartitionReasons(const v1::DatasetPlan& plan,
                                   absl::string_view indent,
                                   int max_ranges = 12);

// "12.3k input rows (4.1% of a full reload, 300k)".
std::string FormatCost(const v1::CostEstimate& cost);

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
