// The model of the failover harness (failover_harness.cc): a plain libpq
// connection for its checks (Pg), the derived datasets as the checks see
// them (daily_revenue and its monthly rollup, each with its transform as
// plain SQL over the raw tables), a warehouse's contents per partition, the
// disturbances a trial applies, and how findings and timings are collected.
//
// Ownership: a Pg owns its connection. Not thread-safe: the harness's one
// thread uses everything here.

#ifndef BACKFILL_TESTS_FAILOVER_HARNESS_MODEL_H_
#define BACKFILL_TESTS_FAILOVER_HARNESS_MODEL_H_

#include <libpq-fe.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace backfill::failover {

using Row = std::vector<std::string>;
using Rows = std::vector<Row>;

// --- Plain SQL ---------------------------------------------------------------

// One libpq connection: text results (NULL as "NULL"), text parameters.
class Pg {
 public:
  Pg() = default;
  ~Pg() {
    if (conn_ != nullptr) PQfinish(conn_);
  }
  Pg(const Pg&) = delete;
  Pg& operator=(const Pg&) = delete;

  bool Connect(const std::string& dsn) {
    if (conn_ != nullptr) PQfinish(conn_);
    conn_ = PQconnectdb(dsn.c_str());
    if (PQstatus(conn_) != CONNECTION_OK) {
      error_ = absl::StrCat("connecting to ", dsn, ": ", PQerrorMessage(conn_));
      return false;
    }
    return true;
  }
  const std::string& error() const { return error_; }

  // Statements without results (several at once, without parameters).
  bool Exec(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const ExecStatusType status = PQresultStatus(r);
    const bool ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
    if (!ok) {
      error_ =
          absl::StrCat(PQresultErrorMessage(r), " in ", sql.substr(0, 300));
    }
    PQclear(r);
    return ok;
  }

  // Every row of `sql`; nullopt (and error()) on failure.
  std::optional<Rows> Query(const std::string& sql,
                            const std::vector<std::string>& params = {}) {
    std::vector<const char*> values;
    for (const std::string& p : params) values.push_back(p.c_str());
    PGresult* r = PQexecParams(
        conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
        values.empty() ? nullptr : values.data(), nullptr, nullptr, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      error_ =
          absl::StrCat(PQresultErrorMessage(r), " in ", sql.substr(0, 300));
      PQclear(r);
      return std::nullopt;
    }
    Rows rows;
    for (int i = 0; i < PQntuples(r); ++i) {
      Row row;
      for (int j = 0; j < PQnfields(r); ++j) {
        row.emplace_back(PQgetisnull(r, i, j) ? "NULL" : PQgetvalue(r, i, j));
      }
      rows.push_back(std::move(row));
    }
    PQclear(r);
    return rows;
  }

  // The one integer `sql` selects; nullopt on failure.
  std::optional<int64_t> Count(const std::string& sql,
                               const std::vector<std::string>& params = {}) {
    std::optional<Rows> rows = Query(sql, params);
    int64_t n = 0;
    if (!rows || rows->size() != 1 || (*rows)[0].size() != 1 ||
        !absl::SimpleAtoi((*rows)[0][0], &n)) {
      if (rows) error_ = absl::StrCat("not one number: ", sql);
      return std::nullopt;
    }
    return n;
  }

 private:
  PGconn* conn_ = nullptr;
  std::string error_;
};

// --- The datasets ------------------------------------------------------------

// A derived dataset as the checks see it: how its published rows are read
// and how its transform computes them from the raw tables, both as plain
// SQL whose first column is the partition. Amounts and refunds are whole
// numbers, so every sum is exact whatever order it is added in, and both
// sides print alike.
struct DatasetModel {
  std::string name;
  std::string published_sql;
  std::string recompute_sql;
};

inline const std::vector<DatasetModel>& Datasets() {
  static const auto* datasets = new std::vector<DatasetModel>{
      {"daily_revenue", "SELECT ds, region, revenue, orders FROM daily_revenue",
       "SELECT o.order_date, c.region, SUM(o.amount - o.refund), COUNT(*) "
       "FROM raw_orders o JOIN dim_customers c ON c.customer_id = "
       "o.customer_id GROUP BY 1, 2"},
      {"monthly_revenue",
       "SELECT month, region, revenue, orders FROM monthly_revenue",
       "SELECT substr(o.order_date, 1, 7), c.region, SUM(o.amount - o.refund), "
       "COUNT(*) FROM raw_orders o JOIN dim_customers c ON c.customer_id = "
       "o.customer_id GROUP BY 1, 2"},
  };
  return *datasets;
}

using Key = std::pair<std::string, std::string>;  // (dataset, partition)
// Rows of each partition, sorted; a partition without rows is absent.
using Contents = std::map<Key, Rows>;

inline std::string KeyName(const Key& key) {
  return absl::StrCat(key.first, "/", key.second);
}

// Reads every dataset with `sql_of` (published_sql or recompute_sql).
inline std::optional<Contents> ReadContents(Pg& db,
                                            std::string DatasetModel::*sql_of) {
  Contents out;
  for (const DatasetModel& ds : Datasets()) {
    std::optional<Rows> rows = db.Query(ds.*sql_of);
    if (!rows) return std::nullopt;
    for (Row& row : *rows) out[{ds.name, row[0]}].push_back(std::move(row));
  }
  for (auto& [key, rows] : out) std::sort(rows.begin(), rows.end());
  return out;
}

inline const Rows& RowsOf(const Contents& c, const Key& key) {
  static const auto* empty = new Rows();
  auto it = c.find(key);
  return it == c.end() ? *empty : it->second;
}

inline std::string Describe(const Rows& rows) {
  if (rows.empty()) return "(no rows)";
  std::vector<std::string> out;
  for (size_t i = 0; i < rows.size() && i < 4; ++i) {
    out.push_back(absl::StrCat("(", absl::StrJoin(rows[i], ", "), ")"));
  }
  if (rows.size() > 4) out.push_back(absl::StrCat("... ", rows.size()));
  return absl::StrJoin(out, " ");
}

// --- Disturbances ------------------------------------------------------------

enum Kind {
  kKillRandom,      // kill -9 of a random replica at a random moment
  kKillInPublish,   // kill -9 of the holder while it publishes
  kKillInTakeover,  // kill -9 of the holder, then of the replica taking over
  kStopHolder,      // SIGSTOP of the holder until another took over, SIGCONT
  kDrainHolder,     // SIGTERM (drain) of the holder mid-run
  kKinds,
};

inline constexpr const char* kKindNames[kKinds] = {
    "kill-random", "kill-in-publish", "kill-in-takeover", "stop-holder",
    "drain-holder"};

inline int KindIndex(const std::string& name) {
  for (int k = 0; k < kKinds; ++k) {
    if (name == kKindNames[k]) return k;
  }
  return -1;
}

// --- Findings ----------------------------------------------------------------

enum Category {
  kLost,        // an acknowledged job not SUCCEEDED, or not terminal in time
  kMixed,       // a partition neither old nor new, or changed outside a job
  kDuplicated,  // a publication, lineage record or job made twice
  kLineage,     // lineage or markers disagree with the job's partitions
  kFenced,      // the audit trail shows a second writer
  kExit,        // a replica died unasked, or did not start or drain
  kOther,       // the harness could not run the trial as planned
  kCategories,
};

inline constexpr const char* kCategoryNames[kCategories] = {
    "lost", "mixed", "duplicated", "lineage", "fenced", "replica", "other"};

struct Findings {
  int count[kCategories] = {};
  std::vector<std::string> details;

  void Add(Category c, const std::string& message) {
    ++count[c];
    if (details.size() < 40) {
      details.push_back(absl::StrCat("[", kCategoryNames[c], "] ", message));
    }
  }
  bool ok() const {
    for (int c : count) {
      if (c != 0) return false;
    }
    return true;
  }
};

// Median and maximum of `values` (0 when empty).
inline std::pair<double, double> MedianMax(std::vector<double> values) {
  if (values.empty()) return {0, 0};
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const double median =
      n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return {median, values.back()};
}

}  // namespace backfill::failover

#endif  // BACKFILL_TESTS_FAILOVER_HARNESS_MODEL_H_
