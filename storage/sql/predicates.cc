#include "storage/sql/predicates.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/plan/affected_by.h"
#include "storage/sql/partition_counts.h"

namespace backfill::sql {

absl::StatusOr<MatchingStatement> MatchingSql(Connection* conn,
                                              const DatasetSpec& dataset,
                                              const std::string& table,
                                              const std::string& predicate) {
  // On lines of its own, so that a comment at its end ends there.
  const std::string where = absl::StrCat("\n", predicate, "\n");
  MatchingStatement out;
  if (!dataset.partition) {
    out.sql =
        absl::StrCat("SELECT 1 FROM ", table, " WHERE (", where, ") LIMIT 1");
  } else {
    ASSIGN_OR_RETURN(out.sql, PartitionCountsSql(conn, dataset, table, where));
  }
  out.predicate_end = out.sql.find(where) + where.size() - 1;
  return out;
}

absl::Status AddMatchingRow(const DatasetSpec& dataset,
                            const std::string& predicate, size_t max_partitions,
                            const std::optional<std::string>& partition,
                            std::set<std::string>* matching) {
  if (!dataset.partition) {
    matching->insert("");
    return absl::OkStatus();
  }
  if (!partition.has_value()) return absl::OkStatus();  // of no partition
  return AddMatchingPartition(dataset, predicate, max_partitions, *partition,
                              matching);
}

}  // namespace backfill::sql
