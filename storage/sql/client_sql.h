// SQL the engine did not write, run or described for every SQL engine:
// custom assertions over a job's staged rows (Engine::RunAssertion),
// consumers' expect queries over published rows (QueryValue), statements
// described without running (DescribeQuery), and a published table's
// columns (DescribeTable).
//
// Such SQL runs only as a query that writes nothing (Connection::Describe
// says so first, and it runs as a subquery in a transaction that is rolled
// back), with the names it uses resolved by Dialect::ScopeClientSql, its
// parameters bound by name (partition_parameters.h), and under a time
// limit where one is given. An assertion reads the dataset's table name as
// a temporary table of the session refilled with each partition's staged
// rows, which shadows the published table.
//
// Stateless free functions over a connection their caller holds.

#ifndef BACKFILL_STORAGE_SQL_CLIENT_SQL_H_
#define BACKFILL_STORAGE_SQL_CLIENT_SQL_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "core/ports/engine.h"
#include "storage/sql/connection.h"

namespace backfill::sql {

// The rows `sql` returns for each of `partitions` of the job's staged rows
// of `dataset`, with up to `samples` of them as "(column=literal, ...)".
absl::StatusOr<std::map<std::string, CountWithSamples>> RunAssertion(
    Connection* conn, const std::string& job_id, const DatasetSpec& dataset,
    const std::vector<std::string>& partitions, const std::string& sql,
    int samples, std::optional<absl::Duration> limit);

// The first value of the first row `sql` returns for `partition`, stopped
// after `limit` (DEADLINE_EXCEEDED).
absl::StatusOr<SqlValue> QueryValue(Connection* conn,
                                    const DatasetSpec& dataset,
                                    const std::string& partition,
                                    const std::string& sql,
                                    absl::Duration limit);

// `sql` described (never run) where each dataset of `stand_ins` without a
// published table, and `own`, is an empty temporary table made from its
// contract. INVALID_ARGUMENT when it does not compile.
absl::StatusOr<QueryShape> DescribeQuery(
    Connection* conn, const std::string& sql,
    const std::vector<const DatasetSpec*>& stand_ins, const DatasetSpec* own);

// The published table's columns, a type the contract declares in the
// contract's own words (Dialect::CatalogTypes); nullopt without a table.
absl::StatusOr<std::optional<std::vector<ColumnSpec>>> DescribeTable(
    Connection* conn, const DatasetSpec& dataset);

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_CLIENT_SQL_H_
