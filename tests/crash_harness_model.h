// The model of the crash harness (crash_harness.cc): the derived datasets
// as its checks see them (contract columns, partition column, the
// transform as plain SQL over the raw tables), typed reads of warehouse
// rows, a warehouse's contents per partition, and how findings are
// collected (GoogleTest failures of a trial's checks become its findings).
//
// Stateless functions; the collector is used by the harness's one thread.

#ifndef BACKFILL_TESTS_CRASH_HARNESS_MODEL_H_
#define BACKFILL_TESTS_CRASH_HARNESS_MODEL_H_

#include <signal.h>
#include <sqlite3.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"
#include "core/model/fingerprint.h"
#include "core/run/crash_point.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill::crash {

namespace fs = std::filesystem;
using e2e::Rows;
using e2e::Sqlite;

// A derived dataset as the checks see it: its contract columns in order,
// its partition column and its transform's logic as plain SQL over the raw
// tables (amounts and refunds are whole numbers, so every sum is exact
// whatever order it is added in).
struct DatasetModel {
  std::string name;  // also the table
  std::vector<std::string> columns;
  std::string partition_column;  // empty: unpartitioned
  std::string recompute_sql;
};

inline const std::vector<DatasetModel>& Datasets() {
  static const auto* datasets = new std::vector<DatasetModel>{
      {"daily_revenue",
       {"ds", "region", "revenue", "orders"},
       "ds",
       "SELECT o.order_date, c.region, SUM(o.amount - o.refund), COUNT(*) "
       "FROM raw_orders o JOIN dim_customers c ON c.customer_id = "
       "o.customer_id GROUP BY 1, 2"},
      {"daily_total",
       {"ds", "revenue"},
       "ds",
       "SELECT o.order_date, SUM(o.amount - o.refund) FROM raw_orders o "
       "JOIN dim_customers c ON c.customer_id = o.customer_id GROUP BY 1"},
      {"region_totals",
       {"region", "revenue"},
       "",
       "SELECT c.region, SUM(o.amount - o.refund) FROM raw_orders o "
       "JOIN dim_customers c ON c.customer_id = o.customer_id GROUP BY 1"},
  };
  return *datasets;
}

inline std::string Quoted(const std::string& name) {
  return absl::StrCat("\"", name, "\"");
}

inline std::string ColumnList(const DatasetModel& ds) {
  std::vector<std::string> cols;
  for (const std::string& c : ds.columns) cols.push_back(Quoted(c));
  return absl::StrJoin(cols, ", ");
}

// --- Typed reads -------------------------------------------------------------

// One value with its storage class: "I:42", "R:17.5" (%.17g), "T:north",
// "B:<hex>" or "N", so that 1 and 1.0 and '1' all differ.
inline std::string TypedValue(sqlite3_stmt* stmt, int c) {
  switch (sqlite3_column_type(stmt, c)) {
    case SQLITE_INTEGER:
      return absl::StrCat("I:",
                          static_cast<int64_t>(sqlite3_column_int64(stmt, c)));
    case SQLITE_FLOAT:
      return absl::StrFormat("R:%.17g", sqlite3_column_double(stmt, c));
    case SQLITE_TEXT:
      return absl::StrCat("T:", std::string(reinterpret_cast<const char*>(
                                                sqlite3_column_text(stmt, c)),
                                            sqlite3_column_bytes(stmt, c)));
    case SQLITE_BLOB: {
      const auto* data =
          static_cast<const unsigned char*>(sqlite3_column_blob(stmt, c));
      std::string out = "B:";
      for (int i = 0; i < sqlite3_column_bytes(stmt, c); ++i) {
        absl::StrAppendFormat(&out, "%02x", data[i]);
      }
      return out;
    }
    default:
      return "N";
  }
}

// Every row of `sql` as typed values; text parameters bound in order.
inline std::optional<Rows> TypedQuery(Sqlite& db, const std::string& sql,
                                      const std::vector<std::string>& params,
                                      std::string* error) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &stmt, nullptr) !=
      SQLITE_OK) {
    *error = absl::StrCat(sql, ": ", db.errmsg());
    return std::nullopt;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    sqlite3_bind_text(stmt, static_cast<int>(i + 1), params[i].c_str(), -1,
                      SQLITE_TRANSIENT);
  }
  Rows rows;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
      row.push_back(TypedValue(stmt, c));
    }
    rows.push_back(std::move(row));
  }
  if (rc != SQLITE_DONE) *error = absl::StrCat(sql, ": ", db.errmsg());
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return std::nullopt;
  return rows;
}

// The fingerprint of `sql`'s rows as storage/sqlite/sqlite_engine.cc's HashRows
// computes it: each value hashed by its storage class, rows summed.
inline std::optional<Fingerprint> FingerprintOf(
    Sqlite& db, const std::string& sql, const std::vector<std::string>& params,
    std::string* error) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &stmt, nullptr) !=
      SQLITE_OK) {
    *error = absl::StrCat(sql, ": ", db.errmsg());
    return std::nullopt;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    sqlite3_bind_text(stmt, static_cast<int>(i + 1), params[i].c_str(), -1,
                      SQLITE_TRANSIENT);
  }
  Fingerprint fp;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    RowHasher h;
    for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
      switch (sqlite3_column_type(stmt, c)) {
        case SQLITE_NULL:
          h.AddNull();
          break;
        case SQLITE_INTEGER:
          h.AddInt(sqlite3_column_int64(stmt, c));
          break;
        case SQLITE_FLOAT:
          h.AddReal(sqlite3_column_double(stmt, c));
          break;
        case SQLITE_TEXT:
          h.AddText(std::string_view(
              reinterpret_cast<const char*>(sqlite3_column_text(stmt, c)),
              sqlite3_column_bytes(stmt, c)));
          break;
        case SQLITE_BLOB: {
          const void* data = sqlite3_column_blob(stmt, c);
          const int n = sqlite3_column_bytes(stmt, c);
          h.AddBlob(data == nullptr
                        ? std::string_view()
                        : std::string_view(static_cast<const char*>(data), n));
          break;
        }
      }
    }
    fp.AddRow(h.Finish());
  }
  if (rc != SQLITE_DONE) *error = absl::StrCat(sql, ": ", db.errmsg());
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return std::nullopt;
  return fp;
}

// --- Partitioned contents ----------------------------------------------------

using Key = std::pair<std::string, std::string>;  // (dataset, partition)
// Rows of each partition, sorted; a partition without rows is absent.
using Contents = std::map<Key, Rows>;

inline std::string KeyName(const Key& key) {
  return key.second.empty() ? key.first
                            : absl::StrCat(key.first, "/", key.second);
}

// Adds `rows` of `ds` to `out` under their partitions.
inline void AddRows(const DatasetModel& ds, Rows rows, Contents* out) {
  int index = -1;
  for (size_t i = 0; i < ds.columns.size(); ++i) {
    if (ds.columns[i] == ds.partition_column) index = static_cast<int>(i);
  }
  for (std::vector<std::string>& row : rows) {
    std::string partition;
    if (index >= 0) {
      partition = row[index];
      if (absl::StartsWith(partition, "T:")) partition = partition.substr(2);
    }
    (*out)[{ds.name, partition}].push_back(std::move(row));
  }
  for (auto& [key, r] : *out) std::sort(r.begin(), r.end());
}

// The published contents of the datasets' tables in the database at `path`
// (the warehouse or a snapshot of it).
inline std::optional<Contents> ReadPublished(const std::string& path,
                                             std::string* error) {
  Sqlite db(path, /*read_only=*/true);
  if (!db.error().empty()) {
    *error = db.error();
    return std::nullopt;
  }
  Contents out;
  for (const DatasetModel& ds : Datasets()) {
    std::optional<Rows> rows = TypedQuery(
        db, absl::StrCat("SELECT ", ColumnList(ds), " FROM ", Quoted(ds.name)),
        {}, error);
    if (!rows) return std::nullopt;
    AddRows(ds, *std::move(rows), &out);
  }
  return out;
}

// The datasets as their transforms compute them from the raw tables now.
inline std::optional<Contents> Recompute(const std::string& warehouse,
                                         std::string* error) {
  Sqlite db(warehouse, /*read_only=*/true);
  if (!db.error().empty()) {
    *error = db.error();
    return std::nullopt;
  }
  Contents out;
  for (const DatasetModel& ds : Datasets()) {
    std::optional<Rows> rows = TypedQuery(db, ds.recompute_sql, {}, error);
    if (!rows) return std::nullopt;
    AddRows(ds, *std::move(rows), &out);
  }
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
  for (size_t i = 0; i < rows.size() && i < 6; ++i) {
    out.push_back(absl::StrCat("(", absl::StrJoin(rows[i], ", "), ")"));
  }
  if (rows.size() > 6) {
    out.push_back(absl::StrCat("... ", rows.size(), " rows"));
  }
  return absl::StrJoin(out, " ");
}

// --- Findings ----------------------------------------------------------------

enum Category {
  kLost,        // an acknowledged job missing or not SUCCEEDED
  kMixed,       // a partition neither old nor new, or a job half published
  kDuplicated,  // a partition or a job published twice
  kIntegrity,   // PRAGMA integrity_check not ok
  kLineage,     // lineage or markers disagree with what is published
  kExit,        // a daemon exited otherwise than expected
  kOther,       // the harness could not run the trial as planned
  kCategories,
};

inline constexpr const char* kCategoryNames[kCategories] = {
    "lost jobs",          "mixed partitions",   "duplicated publications",
    "integrity failures", "lineage mismatches", "daemon exit failures",
    "other errors"};

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

// Failures reported by the e2e helpers (gtest assertions outside a test).
class FailureCollector : public ::testing::EmptyTestEventListener {
 public:
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed()) {
      messages_.push_back(
          absl::StrCat(result.file_name() ? result.file_name() : "?", ":",
                       result.line_number(), ": ", result.summary()));
    }
  }
  std::vector<std::string> Take() { return std::exchange(messages_, {}); }

 private:
  std::vector<std::string> messages_;
};

FailureCollector* collector = nullptr;

}  // namespace backfill::crash

#endif  // BACKFILL_TESTS_CRASH_HARNESS_MODEL_H_
