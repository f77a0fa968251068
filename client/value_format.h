// value_format: the renderings of single values that every backfillctl
// format shares: JSON, text made safe for a terminal, timestamps, state
// names (and their parsing), numbers, counts, partition lists and costs,
// and the small pieces the format units build their lines from.
//
// Text that comes from the server or from users goes through TerminalText()
// in every human format, so that it cannot move the cursor, recolour or
// clear the terminal, or break a line. JSON is exact: the protobuf JSON
// printer escapes by itself. Timestamps are UTC ISO-8601, "-" when unset.
//
// Pure functions; nothing is owned. Thread-safety: stateless and
// thread-safe.

#ifndef BACKFILL_CLIENT_VALUE_FORMAT_H_
#define BACKFILL_CLIENT_VALUE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backfill/v1/backfill.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_ptr_field.h"
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

// "12.3k input rows (4.1% of a full reload, 300k)".
std::string FormatCost(const v1::CostEstimate& cost);

// The pieces the format units build their lines from.

// `text`, "-" when it is empty.
std::string OrDash(absl::string_view text);

// TerminalText(text), "-" when `text` is empty.
std::string SafeOrDash(absl::string_view text);

// TerminalText(text) cut to at most `width` characters, the cut marked with
// "..."; never inside a character or an escape.
std::string SafeTruncate(absl::string_view text, size_t width);

// A percentage with enough digits to not print 0.0% for a small nonzero
// share.
std::string Percent(double ratio);

// "3 keys: c1, c2, c3" / "12 keys: c1, c2, c3, c4, c5, ... (7 more)".
std::string KeysText(
    const google::protobuf::RepeatedPtrField<std::string>& keys);

// "1,234,567".
std::string Grouped(int64_t value);

// "1 partition", "3 partitions".
std::string Plural(int64_t count, absl::string_view noun);

// "(30 unchanged, 12 skipped)" for the early cutoff's counts, "" when both
// are 0.
std::string CutoffText(const v1::PartitionCounts& counts);

// The cost unit's word, "input rows" when unspecified.
std::string UnitOr(v1::CostUnit unit);

// "history (30/30 partitions)", "row counts", "mixed (12/30 partitions
// from history)".
std::string SourceText(v1::EstimateSource source, int64_t from_history,
                       int64_t partitions);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_VALUE_FORMAT_H_
