// The words the CLI prints for the API's vocabulary enums: the grain,
// kind and mapping words of the pipeline files ("day", "derived",
// "lookback"), the cost unit ("input_rows"), the estimate source, what
// put a partition's version in place ("backfill", "rollback") and how
// current a published partition is ("current", "stale").
//
// Each word is the enum value's name without its prefix, in lower case
// (GRAIN_DAY is "day", COST_UNIT_INPUT_ROWS "input_rows"). UNSPECIFIED
// prints as ""; a number this client does not know (from a newer server)
// as "unknown(N)", so nothing is shown as a wrong word.
//
// Pure functions; thread-safe.

#ifndef BACKFILL_CLIENT_VOCABULARY_TEXT_H_
#define BACKFILL_CLIENT_VOCABULARY_TEXT_H_

#include <string>

#include "backfill/v1/backfill.pb.h"

namespace backfill {

// "hour", "day", "month", "key"; GRAIN_NONE is "" (unpartitioned).
std::string GrainText(v1::Grain grain);
// "source", "derived".
std::string DatasetKindText(v1::DatasetKind kind);
// "identity", "all", "rollup", "lookback".
std::string MappingText(v1::PartitionMapping mapping);
// "http", "command".
std::string ConsumerKindText(v1::ConsumerKind kind);
// "input_rows".
std::string CostUnitText(v1::CostUnit unit);
// "history", "row_counts", "mixed".
std::string EstimateSourceText(v1::EstimateSource source);
// "backfill", "rollback".
std::string VersionKindText(v1::VersionKind kind);
// "current", "stale", "due", "frozen".
std::string FreshnessText(v1::PartitionFreshness freshness);

}  // namespace backfill

#endif  // BACKFILL_CLIENT_VOCABULARY_TEXT_H_
