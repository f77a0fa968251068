#include "storage/sql/partition_counts.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/model/fingerprint.h"
#include "core/model/partition_layout.h"
#include "storage/sql/dialect.h"
#include "storage/sql/engine_checks.h"

namespace backfill::sql {

absl::StatusOr<std::string> PartitionCountsSql(Connection* conn,
                                               const DatasetSpec& dataset,
                                               const std::string& from,
                                               const std::string& where) {
  if (!dataset.partition) {
    return absl::StrCat("SELECT '' AS _bf_p, COUNT(*) FROM ", from, " WHERE (",
                        where, ")");
  }
  const Dialect& d = conn->dialect();
  ASSIGN_OR_RETURN(std::unique_ptr<Membership> raw,
                   d.MembershipOf(conn, dataset, ""));
  ASSIGN_OR_RETURN(std::unique_ptr<Membership> grouped,
                   d.MembershipOf(conn, dataset, "_bf_g."));
  // Grouped by the raw values first: the partition of each distinct value
  // is computed once, not once per row.
  return absl::StrCat("SELECT ", grouped->Expression(),
                      " AS _bf_p, CAST(SUM(_bf_g._bf_n) AS BIGINT) FROM "
                      "(SELECT ",
                      raw->Columns(), ", COUNT(*) AS _bf_n FROM ", from,
                      " WHERE (", where, ") GROUP BY ", raw->GroupBy(),
                      ") AS _bf_g GROUP BY 1");
}

absl::StatusOr<PartitionCounts> CountRowsByPartition(
    Connection* conn, const DatasetSpec& dataset) {
  const Dialect& d = conn->dialect();
  const Relation table = d.Published(dataset);
  PartitionCounts out;
  ASSIGN_OR_RETURN(bool exists, conn->Exists(table));
  if (exists) {
    ASSIGN_OR_RETURN(std::string sql,
                     PartitionCountsSql(conn, dataset, d.Name(table), "1=1"));
    ASSIGN_OR_RETURN(Result counts, conn->Exec(sql));
    for (const Row& row : counts.rows) {
      if (row[0].null()) {
        out.unmapped += row[1].integer;
      } else {
        out.rows[row[0].text] += row[1].integer;
      }
    }
  }
  if (!dataset.partition && out.rows.empty()) out.rows[""] = 0;
  return out;
}

absl::StatusOr<std::vector<int64_t>> CountRowsInPartitions(
    Connection* conn, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions) {
  const PartitionLayout layout = dataset.layout();
  for (const std::string& p : partitions) {
    RETURN_IF_ERROR(CheckPartition(dataset, p));
    std::string key;
    if (layout.grain == Grain::kKey) {
      key = p;
    } else if (layout.two_dimensional()) {
      ASSIGN_OR_RETURN(TimeKey tk, SplitTimeKey(layout, p));
      key = tk.key;
    }
    if ((layout.grain == Grain::kKey || layout.two_dimensional()) &&
        std::find(dataset.partition->keys.begin(),
                  dataset.partition->keys.end(),
                  key) == dataset.partition->keys.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("dataset ", dataset.name, " declares no key '", key,
                       "' (partition '", p, "')"));
    }
  }
  const Dialect& d = conn->dialect();
  const Relation table = d.Published(dataset);
  std::vector<int64_t> out;
  out.reserve(partitions.size());
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(conn, TxnMode::kSnapshot));
  ASSIGN_OR_RETURN(bool published, conn->Exists(table));
  std::unique_ptr<Membership> member;
  if (published) {
    ASSIGN_OR_RETURN(member, d.MembershipOf(conn, dataset, ""));
  }
  for (const std::string& p : partitions) {
    int64_t n = 0;
    if (published) {
      ASSIGN_OR_RETURN(Params values, member->Values(p));
      ASSIGN_OR_RETURN(
          n, conn->Int(absl::StrCat("SELECT COUNT(*) FROM ", d.Name(table),
                                    " WHERE ", member->Condition(1)),
                       values));
    }
    out.push_back(n);
  }
  RETURN_IF_ERROR(txn.Commit());
  return out;
}

absl::StatusOr<PartitionStats> RecountStatistics(Connection* conn,
                                                 const DatasetSpec& dataset,
                                                 absl::Time now) {
  ASSIGN_OR_RETURN(PartitionCounts counts, CountRowsByPartition(conn, dataset));
  PartitionStats stats;
  stats.total_rows = counts.unmapped;
  for (const auto& [partition, n] : counts.rows) {
    stats.total_rows += n;
    if (n > 0) stats.rows[partition] = n;
  }
  stats.recounted_at = now;
  stats.refresh = "recount";
  return stats;
}

absl::StatusOr<std::map<std::string, InputFingerprint>> PartitionFingerprints(
    Connection* conn, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions) {
  const Dialect& d = conn->dialect();
  const Relation table = d.Published(dataset);
  std::map<std::string, InputFingerprint> out;
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(conn, TxnMode::kSnapshot));
  ASSIGN_OR_RETURN(bool published, conn->Exists(table));
  std::unique_ptr<Membership> member;
  if (published && dataset.partition) {
    ASSIGN_OR_RETURN(member, d.MembershipOf(conn, dataset, ""));
  }
  for (const std::string& partition : partitions) {
    Fingerprint fp;
    if (published) {
      std::string rest = absl::StrCat("FROM ", d.Name(table));
      Params values;
      if (member != nullptr && !partition.empty()) {
        ASSIGN_OR_RETURN(values, member->Values(partition));
        absl::StrAppend(&rest, " WHERE ", member->Condition(1));
      }
      ASSIGN_OR_RETURN(fp, conn->HashRows(ColumnList(dataset), rest, values));
    }
    InputFingerprint& f = out[partition];
    f.dataset = dataset.name;
    f.partition = partition;
    f.fingerprint = fp.ToString();
    f.rows = fp.rows();
  }
  RETURN_IF_ERROR(txn.Commit());
  return out;
}

}  // namespace backfill::sql
