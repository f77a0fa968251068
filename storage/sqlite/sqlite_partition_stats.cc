#include "storage/sqlite/sqlite_partition_stats.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/model/fingerprint.h"
#include "core/model/partition.h"
#include "spdlog/spdlog.h"
#include "storage/sqlite/sqlite_membership.h"

namespace backfill::sqlite {
namespace {

// What a dataset's table is, as far as the statistics care.
struct TableShape {
  bool exists = false;
  std::string rowid;  // a rowid alias no column shadows; "" when none
  std::string signature;
};

// The stored meta of one dataset.
struct Stored {
  std::string signature;
  int64_t max_rowid = 0;
  int64_t min_rowid = 0;
  std::string last_row;
  int64_t total = 0;
  int64_t recounted_at = 0;  // unix micros
  int64_t refreshed_at = 0;
  bool operator==(const Stored& o) const {
    return signature == o.signature && max_rowid == o.max_rowid &&
           min_rowid == o.min_rowid && last_row == o.last_row &&
           total == o.total && recounted_at == o.recounted_at &&
           refreshed_at == o.refreshed_at;
  }
};

struct RowidFacts {
  int64_t max = 0;
  int64_t min = 0;
};

absl::StatusOr<TableShape> ShapeOf(Database* db, const DatasetSpec& ds) {
  TableShape shape;
  std::string type, sql;
  int64_t rootpage = 0;
  {
    ASSIGN_OR_RETURN(Statement q,
                     db->Prepare("SELECT type, rootpage, COALESCE(sql, '') "
                                 "FROM main.sqlite_master WHERE type IN "
                                 "('table', 'view') AND name = ?1 COLLATE "
                                 "NOCASE"));
    RETURN_IF_ERROR(q.BindText(1, ds.table));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return shape;
    type = q.ColumnText(0);
    rootpage = q.ColumnInt(1);
    sql = q.ColumnText(2);
  }
  shape.exists = true;
  bool without_rowid = false;
  if (type == "table") {
    ASSIGN_OR_RETURN(Statement q,
                     db->Prepare("SELECT wr FROM pragma_table_list WHERE "
                                 "schema = 'main' AND name = ?1 COLLATE "
                                 "NOCASE"));
    RETURN_IF_ERROR(q.BindText(1, ds.table));
    ASSIGN_OR_RETURN(bool row, q.Step());
    without_rowid = row && q.ColumnInt(0) != 0;
  }
  if (type == "table" && !without_rowid) {
    std::set<std::string> columns;
    ASSIGN_OR_RETURN(Statement q,
                     db->Prepare("SELECT name FROM pragma_table_info(?1, "
                                 "'main')"));
    RETURN_IF_ERROR(q.BindText(1, ds.table));
    while (true) {
      ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      columns.insert(absl::AsciiStrToLower(q.ColumnText(0)));
    }
    for (const char* alias : {"_rowid_", "rowid", "oid"}) {
      if (columns.count(alias) == 0) {
        shape.rowid = alias;
        break;
      }
    }
  }
  std::string column = ds.partition ? ds.partition->column : "";
  if (ds.two_dimensional())
    absl::StrAppend(&column, ",", ds.partition->key_column);
  shape.signature =
      absl::StrCat(type, "|", rootpage, "|", without_rowid ? 1 : 0, "|",
                   GrainName(ds.grain()), "|", column, "|", sql);
  return shape;
}

absl::StatusOr<RowidFacts> FactsOf(Database* db, const DatasetSpec& ds,
                                   const std::string& rowid) {
  // One aggregate per statement: SQLite answers a lone MIN or MAX of the
  // rowid from the b-tree's edge, but scans for both at once.
  RowidFacts facts;
  ASSIGN_OR_RETURN(facts.max,
                   db->QueryInt(absl::StrCat("SELECT COALESCE(MAX(", rowid,
                                             "), 0) FROM main.",
                                             QuoteIdentifier(ds.table))));
  ASSIGN_OR_RETURN(facts.min,
                   db->QueryInt(absl::StrCat("SELECT COALESCE(MIN(", rowid,
                                             "), 0) FROM main.",
                                             QuoteIdentifier(ds.table))));
  return facts;
}

// The fingerprint of the row with rowid `at` ("" when there is none).
absl::StatusOr<std::string> RowAt(Database* db, const DatasetSpec& ds,
                                  const std::string& rowid, int64_t at) {
  ASSIGN_OR_RETURN(
      Statement q,
      db->Prepare(absl::StrCat("SELECT * FROM main.", QuoteIdentifier(ds.table),
                               " WHERE ", rowid, " = ?1")));
  RETURN_IF_ERROR(q.BindInt(1, at));
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::string();
  Fingerprint fp;
  fp.AddRow(HashCurrentRow(q));
  return fp.ToString();
}

// "SELECT <partition>, COUNT(*) FROM <table> [WHERE <where>] GROUP BY
// <column>": each group of equal values (COLLATE BINARY: values a
// collation calls equal may still map differently) mapped by the one
// definition of membership.
std::string GroupedCountSql(const DatasetSpec& ds, std::string_view where) {
  const std::string table = QuoteIdentifier(ds.table);
  if (!ds.partition) {
    return absl::StrCat("SELECT '', COUNT(*) FROM main.", table,
                        where.empty() ? "" : " WHERE ",
                        absl::string_view(where.data(), where.size()));
  }
  return absl::StrCat("SELECT ", PartitionExpression(ds),
                      ", COUNT(*) FROM main.", table,
                      where.empty() ? "" : " WHERE ",
                      absl::string_view(where.data(), where.size()),
                      " GROUP BY ", PartitionGroupBy(ds));
}

// Steps a GroupedCountSql statement: rows by partition (groups of no
// partition only in *total) into `rows` (added), all rows into `total`.
absl::Status AddGroups(Statement& q, std::map<std::string, int64_t>* rows,
                       int64_t* total) {
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    const int64_t n = q.ColumnInt(1);
    *total += n;
    if (!q.ColumnIsNull(0) && n > 0) (*rows)[q.ColumnText(0)] += n;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Stored>> ReadStatsMeta(
    Database* db, const std::string& dataset) {
  ASSIGN_OR_RETURN(
      Statement q,
      db->Prepare(absl::StrCat(
          "SELECT signature, max_rowid, min_rowid, last_row, "
          "total_rows, recounted_at, refreshed_at FROM main.",
          QuoteIdentifier(kStatsMetaTable), " WHERE dataset = ?1")));
  RETURN_IF_ERROR(q.BindText(1, dataset));
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::optional<Stored>();
  Stored s;
  s.signature = q.ColumnText(0);
  s.max_rowid = q.ColumnInt(1);
  s.min_rowid = q.ColumnInt(2);
  s.last_row = q.ColumnText(3);
  s.total = q.ColumnInt(4);
  s.recounted_at = q.ColumnInt(5);
  s.refreshed_at = q.ColumnInt(6);
  return std::optional<Stored>(std::move(s));
}

// Stored rows of the dataset.
absl::StatusOr<std::map<std::string, int64_t>> ReadRows(
    Database* db, const std::string& dataset) {
  ASSIGN_OR_RETURN(Statement q,
                   db->Prepare(absl::StrCat(
                       "SELECT \"partition\", rows FROM main.",
                       QuoteIdentifier(kStatsTable), " WHERE dataset = ?1")));
  RETURN_IF_ERROR(q.BindText(1, dataset));
  std::map<std::string, int64_t> rows;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    rows[q.ColumnText(0)] = q.ColumnInt(1);
  }
  return rows;
}

absl::Status DeleteStats(Database* db, const std::string& dataset) {
  for (const char* table : {kStatsTable, kStatsMetaTable}) {
    ASSIGN_OR_RETURN(
        Statement q,
        db->Prepare(absl::StrCat("DELETE FROM main.", QuoteIdentifier(table),
                                 " WHERE dataset = ?1")));
    RETURN_IF_ERROR(q.BindText(1, dataset));
    RETURN_IF_ERROR(q.Run());
  }
  return absl::OkStatus();
}

absl::Status WriteStatsMeta(Database* db, const std::string& dataset,
                            const Stored& s) {
  ASSIGN_OR_RETURN(
      Statement q,
      db->Prepare(absl::StrCat(
          "INSERT OR REPLACE INTO main.", QuoteIdentifier(kStatsMetaTable),
          " (dataset, signature, max_rowid, min_rowid, last_row, "
          "total_rows, recounted_at, refreshed_at) VALUES (?1, "
          "?2, ?3, ?4, ?5, ?6, ?7, ?8)")));
  RETURN_IF_ERROR(q.BindText(1, dataset));
  RETURN_IF_ERROR(q.BindText(2, s.signature));
  RETURN_IF_ERROR(q.BindInt(3, s.max_rowid));
  RETURN_IF_ERROR(q.BindInt(4, s.min_rowid));
  RETURN_IF_ERROR(q.BindText(5, s.last_row));
  RETURN_IF_ERROR(q.BindInt(6, s.total));
  RETURN_IF_ERROR(q.BindInt(7, s.recounted_at));
  RETURN_IF_ERROR(q.BindInt(8, s.refreshed_at));
  return q.Run();
}

// Sets the stored rows of each partition (a count of 0 removes it):
// `rows[i]` of `partitions[i]`.
absl::Status WriteRows(Database* db, const std::string& dataset,
                       const std::vector<std::string>& partitions,
                       const std::vector<int64_t>& rows) {
  ASSIGN_OR_RETURN(
      Statement put,
      db->Prepare(absl::StrCat(
          "INSERT OR REPLACE INTO main.", QuoteIdentifier(kStatsTable),
          " (dataset, \"partition\", rows) VALUES (?1, ?2, ?3)")));
  ASSIGN_OR_RETURN(Statement del,
                   db->Prepare(absl::StrCat(
                       "DELETE FROM main.", QuoteIdentifier(kStatsTable),
                       " WHERE dataset = ?1 AND \"partition\" "
                       "= ?2")));
  for (size_t i = 0; i < partitions.size(); ++i) {
    const int64_t n = rows[i];
    Statement& q = n > 0 ? put : del;
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, dataset));
    RETURN_IF_ERROR(q.BindText(2, partitions[i]));
    if (n > 0) RETURN_IF_ERROR(q.BindInt(3, n));
    RETURN_IF_ERROR(q.Run());
  }
  return absl::OkStatus();
}

// As above, from partition -> rows.
absl::Status WriteRows(Database* db, const std::string& dataset,
                       const std::map<std::string, int64_t>& rows) {
  std::vector<std::string> partitions;
  std::vector<int64_t> counts;
  partitions.reserve(rows.size());
  counts.reserve(rows.size());
  for (const auto& [partition, n] : rows) {
    partitions.push_back(partition);
    counts.push_back(n);
  }
  return WriteRows(db, dataset, partitions, counts);
}

// The meta that describes the table as it is now, given its counts.
absl::StatusOr<Stored> MetaOfTable(Database* db, const DatasetSpec& ds,
                                   const TableShape& shape, int64_t total,
                                   int64_t recounted_at, int64_t now) {
  Stored s;
  s.signature = shape.signature;
  s.total = total;
  s.recounted_at = recounted_at;
  s.refreshed_at = now;
  if (!shape.rowid.empty()) {
    ASSIGN_OR_RETURN(RowidFacts f, FactsOf(db, ds, shape.rowid));
    s.max_rowid = f.max;
    s.min_rowid = f.min;
    ASSIGN_OR_RETURN(s.last_row, RowAt(db, ds, shape.rowid, f.max));
  }
  return s;
}

// True when the signal says the stored statistics describe the table as
// it is (no change at all since they were written).
absl::StatusOr<bool> IsCurrent(Database* db, const DatasetSpec& ds,
                               const TableShape& shape,
                               const std::optional<Stored>& stored) {
  if (!stored || !shape.exists || shape.rowid.empty() ||
      stored->signature != shape.signature) {
    return false;
  }
  ASSIGN_OR_RETURN(RowidFacts f, FactsOf(db, ds, shape.rowid));
  if (f.max != stored->max_rowid || f.min != stored->min_rowid) return false;
  ASSIGN_OR_RETURN(std::string last, RowAt(db, ds, shape.rowid, f.max));
  return last == stored->last_row;
}

// The partition after the day (month) of a candidate range's prefix, as a
// prefix; "" when there is none.
std::string NextPrefix(const std::string& prefix) {
  const Grain g = prefix.size() == 7 ? Grain::kMonth : Grain::kDay;
  absl::StatusOr<PartitionBounds> b = BoundsOf(g, prefix);
  if (!b.ok()) return "";
  return b->end.substr(0, prefix.size());
}

// The shape of a time grain's partition value: its length, and for an hour
// "THH" with HH in 00..23 after the day. The day (month) itself is validated
// by CandidateRangeOf.
absl::Status CheckTimeShape(Grain grain, const std::string& p) {
  const size_t size = grain == Grain::kHour  ? 13
                      : grain == Grain::kDay ? 10
                                             : 7;
  bool ok = p.size() == size;
  if (ok && grain == Grain::kHour) {
    ok = p[10] == 'T' && absl::ascii_isdigit(p[11]) &&
         absl::ascii_isdigit(p[12]) && (p[11] - '0') * 10 + (p[12] - '0') < 24;
  }
  if (ok) return absl::OkStatus();
  return ValidatePartition(grain, p);  // the error message names the format
}

absl::StatusOr<bool> HasIndexOn(Database* db, const DatasetSpec& ds) {
  ASSIGN_OR_RETURN(Statement q,
                   db->Prepare("SELECT 1 FROM pragma_index_list(?1, 'main') "
                               "AS il, pragma_index_info(il.name, 'main') AS "
                               "ii WHERE il.partial = 0 AND ii.seqno = 0 AND "
                               "ii.name = ?2 COLLATE NOCASE LIMIT 1"));
  RETURN_IF_ERROR(q.BindText(1, ds.table));
  RETURN_IF_ERROR(q.BindText(2, ds.partition->column));
  return q.Step();
}

// Partitions as given (any order, repeats allowed), seen in partition
// order, with a row count for each as given.
class AlignedCounts {
 public:
  explicit AlignedCounts(const std::vector<std::string>& partitions)
      : partitions_(partitions), rows_(partitions.size(), 0) {
    if (!std::is_sorted(partitions.begin(), partitions.end())) {
      order_.resize(partitions.size());
      std::iota(order_.begin(), order_.end(), 0);
      std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
        return partitions[a] < partitions[b];
      });
    }
  }

  size_t size() const { return partitions_.size(); }
  // The k-th partition in partition order.
  const std::string& SortedAt(size_t k) const {
    return partitions_[IndexAt(k)];
  }
  // Adds `n` rows to every place `partition` is given at (none: ignored).
  // Tries where the last call ended first: groups come in partition order.
  void Add(const std::string& partition, int64_t n) {
    size_t k = last_;
    if (k >= size() || SortedAt(k) != partition) {
      k = next_;
      if (k >= size() || SortedAt(k) != partition) k = LowerBound(partition);
    }
    last_ = k;
    for (; k < size() && SortedAt(k) == partition; ++k) rows_[IndexAt(k)] += n;
    next_ = k;
  }
  // The counts, aligned with the partitions as given.
  std::vector<int64_t> Take() { return std::move(rows_); }

 private:
  size_t IndexAt(size_t k) const { return order_.empty() ? k : order_[k]; }
  size_t LowerBound(const std::string& partition) const {
    size_t lo = 0;
    size_t hi = size();
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (SortedAt(mid) < partition) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  const std::vector<std::string>& partitions_;
  std::vector<int64_t> rows_;
  std::vector<size_t> order_;  // empty: the partitions are in order
  size_t last_ = 0;
  size_t next_ = 0;
};

}  // namespace

absl::Status CreatePartitionStatsTables(Database* db) {
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db));
  RETURN_IF_ERROR(db->Exec(absl::StrCat(
      "CREATE TABLE IF NOT EXISTS main.", QuoteIdentifier(kStatsTable),
      " (dataset TEXT NOT NULL, \"partition\" TEXT NOT NULL, rows INTEGER NOT "
      "NULL, PRIMARY KEY (dataset, \"partition\")) WITHOUT ROWID")));
  RETURN_IF_ERROR(db->Exec(absl::StrCat(
      "CREATE TABLE IF NOT EXISTS main.", QuoteIdentifier(kStatsMetaTable),
      " (dataset TEXT PRIMARY KEY, signature TEXT NOT NULL, max_rowid INTEGER "
      "NOT NULL, min_rowid INTEGER NOT NULL, last_row TEXT NOT NULL, "
      "total_rows INTEGER NOT NULL, recounted_at INTEGER NOT NULL, "
      "refreshed_at INTEGER NOT NULL)")));
  return txn.Commit();
}

absl::StatusOr<std::vector<int64_t>> CountPartitions(
    Database* db, const DatasetSpec& ds,
    const std::vector<std::string>& partitions) {
  const Grain grain = ds.grain();
  for (const std::string& p : partitions) {
    // A time grain's values are checked by their shape here and by their
    // day (month) in CandidateRangeOf below: validating each of 100,000
    // hours in full would cost more than counting them.
    RETURN_IF_ERROR(ds.two_dimensional() ? ValidatePartition(ds.layout(), p)
                    : IsTimeGrain(grain) ? CheckTimeShape(grain, p)
                                         : ValidatePartition(grain, p));
  }
  if (partitions.empty()) return std::vector<int64_t>();
  ASSIGN_OR_RETURN(bool exists, db->TableExists(ds.table));
  if (!exists) return std::vector<int64_t>(partitions.size(), 0);
  if (!ds.partition) {
    ASSIGN_OR_RETURN(int64_t n,
                     db->QueryInt(absl::StrCat("SELECT COUNT(*) FROM main.",
                                               QuoteIdentifier(ds.table))));
    return std::vector<int64_t>(partitions.size(), n);
  }
  const std::string col = QuoteIdentifier(ds.partition->column);
  AlignedCounts counts(partitions);
  if (grain == Grain::kKey) {
    ASSIGN_OR_RETURN(Statement q,
                     db->Prepare(GroupedCountSql(
                         ds, absl::StrCat("(", col, " = ?1 OR ", col,
                                          " = CAST(?1 AS INTEGER))"))));
    for (size_t k = 0; k < counts.size(); ++k) {
      const std::string& key = counts.SortedAt(k);
      if (k > 0 && counts.SortedAt(k - 1) == key) continue;
      RETURN_IF_ERROR(q.Reset());
      RETURN_IF_ERROR(q.BindText(1, key));
      // Only the group of the key itself: another key's rows may match
      // the condition too, and are counted for that key.
      while (true) {
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (!row) break;
        const int64_t n = q.ColumnInt(1);
        if (!q.ColumnIsNull(0) && n > 0 && q.ColumnText(0) == key) {
          counts.Add(key, n);
        }
      }
    }
  } else {
    // Runs of consecutive days (months) as candidate ranges [lo, hi).
    std::vector<std::pair<std::string, std::string>> runs;
    std::string last_prefix;
    // A partition's candidate range is [prefix, prefix + "~") with its day
    // (month) as the prefix (CandidateRangeOf): hours of one day share it,
    // and so do the keys of a time x key partition ("2025-03-01|eu").
    const size_t prefix_size = grain == Grain::kMonth ? 7 : 10;
    const PartitionLayout layout = ds.layout();
    for (size_t k = 0; k < counts.size(); ++k) {
      const std::string& p = counts.SortedAt(k);
      if (!runs.empty() && p.compare(0, prefix_size, last_prefix) == 0) {
        continue;
      }
      ASSIGN_OR_RETURN(CandidateRange range, CandidateRangeOf(layout, p));
      if (!runs.empty() && range.lo == NextPrefix(last_prefix)) {
        runs.back().second = range.hi;
      } else {
        runs.emplace_back(range.lo, range.hi);
      }
      last_prefix = range.lo;
    }
    ASSIGN_OR_RETURN(bool indexed, HasIndexOn(db, ds));
    if (!indexed && runs.size() > 1) {
      // Each run would scan the table: scan it once instead.
      runs = {{runs.front().first, runs.back().second}};
    }
    ASSIGN_OR_RETURN(Statement q,
                     db->Prepare(GroupedCountSql(
                         ds, absl::StrCat(col, " >= ?1 AND ", col, " < ?2"))));
    for (const auto& [lo, hi] : runs) {
      RETURN_IF_ERROR(q.Reset());
      RETURN_IF_ERROR(q.BindText(1, lo));
      RETURN_IF_ERROR(q.BindText(2, hi));
      // Groups of no partition, or of partitions not asked for (the other
      // hours of a day), are left out.
      while (true) {
        ASSIGN_OR_RETURN(bool row, q.Step());
        if (!row) break;
        const int64_t n = q.ColumnInt(1);
        if (!q.ColumnIsNull(0) && n > 0) counts.Add(q.ColumnText(0), n);
      }
    }
  }
  return counts.Take();
}

absl::StatusOr<bool> StatsContradicted(
    Database* db, const DatasetSpec& ds,
    const std::vector<std::string>& partitions,
    const std::vector<int64_t>& exact) {
  if (partitions.empty()) return false;
  ASSIGN_OR_RETURN(TableShape shape, ShapeOf(db, ds));
  ASSIGN_OR_RETURN(std::optional<Stored> stored, ReadStatsMeta(db, ds.name));
  ASSIGN_OR_RETURN(bool current, IsCurrent(db, ds, shape, stored));
  if (!current) return false;  // a refresh will bring them up to date
  // The stored rows of the partitions' span, in partition order, against
  // the partitions in partition order.
  std::vector<size_t> order;
  if (!std::is_sorted(partitions.begin(), partitions.end())) {
    order.resize(partitions.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return partitions[a] < partitions[b];
    });
  }
  const auto index_at = [&](size_t k) { return order.empty() ? k : order[k]; };
  ASSIGN_OR_RETURN(
      Statement q,
      db->Prepare(absl::StrCat(
          "SELECT \"partition\", rows FROM main.", QuoteIdentifier(kStatsTable),
          " WHERE dataset = ?1 AND \"partition\" >= ?2 AND \"partition\" "
          "<= ?3 ORDER BY \"partition\"")));
  RETURN_IF_ERROR(q.BindText(1, ds.name));
  RETURN_IF_ERROR(q.BindText(2, partitions[index_at(0)]));
  RETURN_IF_ERROR(q.BindText(3, partitions[index_at(partitions.size() - 1)]));
  std::optional<std::pair<std::string, int64_t>> row;  // the next stored row
  const auto next_row = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(bool more, q.Step());
    if (more) {
      row.emplace(q.ColumnText(0), q.ColumnInt(1));
    } else {
      row.reset();
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(next_row());
  for (size_t k = 0; k < partitions.size(); ++k) {
    const std::string& p = partitions[index_at(k)];
    // Stored rows compare in SQLite's order of the column, BINARY: the
    // bytes' order, as std::string's.
    while (row && row->first < p) RETURN_IF_ERROR(next_row());
    const int64_t stored_rows = row && row->first == p ? row->second : 0;
    if (stored_rows != exact[index_at(k)]) return true;
  }
  return false;
}

absl::Status DropPartitionStats(Database* db, const std::string& dataset) {
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db));
  RETURN_IF_ERROR(DeleteStats(db, dataset));
  return txn.Commit();
}

absl::StatusOr<PartitionStats> RefreshPartitionStats(Database* db,
                                                     const DatasetSpec& ds,
                                                     const StatsPolicy& policy,
                                                     absl::Time now) {
  const int64_t now_us = absl::ToUnixMicros(now);
  enum class Write { kNone, kDrop, kAll, kDelta };
  Write write = Write::kNone;
  PartitionStats out;
  std::optional<Stored> base;
  Stored next;
  std::map<std::string, int64_t> changed;  // kDelta: new counts
  {
    ASSIGN_OR_RETURN(Transaction txn,
                     Transaction::Begin(db, Transaction::Mode::kDeferred));
    ASSIGN_OR_RETURN(TableShape shape, ShapeOf(db, ds));
    ASSIGN_OR_RETURN(base, ReadStatsMeta(db, ds.name));
    bool recount = true;
    if (!shape.exists) {
      recount = false;
      out.refresh = "recount";
      out.recounted_at = now;
      if (base) write = Write::kDrop;
    } else if (base && base->signature == shape.signature &&
               !shape.rowid.empty() && policy.max_age > absl::ZeroDuration() &&
               now - absl::FromUnixMicros(base->recounted_at) <
                   policy.max_age) {
      ASSIGN_OR_RETURN(RowidFacts f, FactsOf(db, ds, shape.rowid));
      if (f.max >= base->max_rowid && f.min == base->min_rowid) {
        ASSIGN_OR_RETURN(std::string last,
                         RowAt(db, ds, shape.rowid, base->max_rowid));
        if (last == base->last_row) {
          recount = false;
          ASSIGN_OR_RETURN(out.rows, ReadRows(db, ds.name));
          out.total_rows = base->total;
          out.recounted_at = absl::FromUnixMicros(base->recounted_at);
          out.refresh = "current";
          if (f.max > base->max_rowid) {
            // Appended since: count only the rows above max_rowid.
            ASSIGN_OR_RETURN(Statement q,
                             db->Prepare(GroupedCountSql(
                                 ds, absl::StrCat(shape.rowid, " > ?1"))));
            RETURN_IF_ERROR(q.BindInt(1, base->max_rowid));
            std::map<std::string, int64_t> added;
            int64_t added_total = 0;
            RETURN_IF_ERROR(AddGroups(q, &added, &added_total));
            for (const auto& [p, n] : added) {
              out.rows[p] += n;
              changed[p] = out.rows[p];
            }
            out.total_rows += added_total;
            out.refresh = "appended";
            ASSIGN_OR_RETURN(next, MetaOfTable(db, ds, shape, out.total_rows,
                                               base->recounted_at, now_us));
            write = Write::kDelta;
          }
        }
      }
    }
    if (recount) {
      ASSIGN_OR_RETURN(Statement q, db->Prepare(GroupedCountSql(ds, "")));
      RETURN_IF_ERROR(AddGroups(q, &out.rows, &out.total_rows));
      out.refresh = "recount";
      out.recounted_at = now;
      if (shape.rowid.empty()) {
        // Nothing to tell a change by: counted in full every time.
        if (base) write = Write::kDrop;
      } else {
        ASSIGN_OR_RETURN(
            next, MetaOfTable(db, ds, shape, out.total_rows, now_us, now_us));
        write = Write::kAll;
      }
    }
    RETURN_IF_ERROR(txn.Commit());
  }
  if (write == Write::kNone) return out;
  absl::Status persisted = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db));
    ASSIGN_OR_RETURN(std::optional<Stored> now_stored,
                     ReadStatsMeta(db, ds.name));
    if (now_stored.has_value() != base.has_value() ||
        (now_stored && !(*now_stored == *base))) {
      return absl::OkStatus();  // written meanwhile: theirs stands
    }
    switch (write) {
      case Write::kNone:
        break;
      case Write::kDrop:
        RETURN_IF_ERROR(DeleteStats(db, ds.name));
        break;
      case Write::kAll:
        RETURN_IF_ERROR(DeleteStats(db, ds.name));
        RETURN_IF_ERROR(WriteRows(db, ds.name, out.rows));
        RETURN_IF_ERROR(WriteStatsMeta(db, ds.name, next));
        break;
      case Write::kDelta:
        RETURN_IF_ERROR(WriteRows(db, ds.name, changed));
        RETURN_IF_ERROR(WriteStatsMeta(db, ds.name, next));
        break;
    }
    return txn.Commit();
  }();
  if (!persisted.ok()) {
    // The figures are right for this call; the next refresh redoes them.
    spdlog::warn("{}: partition statistics not saved: {}", ds.name,
                 persisted.ToString());
  }
  return out;
}

absl::StatusOr<TableSignal> ReadTableSignal(Database* db,
                                            const DatasetSpec& dataset) {
  ASSIGN_OR_RETURN(TableShape shape, ShapeOf(db, dataset));
  TableSignal signal;
  signal.exists = shape.exists;
  signal.rowid = shape.rowid;
  signal.signature = shape.signature;
  if (shape.exists && !shape.rowid.empty()) {
    ASSIGN_OR_RETURN(RowidFacts f, FactsOf(db, dataset, shape.rowid));
    signal.max_rowid = f.max;
    signal.min_rowid = f.min;
  }
  return signal;
}

absl::StatusOr<std::string> RowFingerprintAt(Database* db,
                                             const DatasetSpec& dataset,
                                             const std::string& rowid,
                                             int64_t at) {
  return RowAt(db, dataset, rowid, at);
}

absl::StatusOr<StatsWrite> StatsWrite::Begin(
    Database* db, const DatasetSpec& dataset,
    std::vector<std::string> partitions) {
  StatsWrite w;
  w.dataset_ = &dataset;
  if (!std::is_sorted(partitions.begin(), partitions.end())) {
    std::sort(partitions.begin(), partitions.end());
  }
  partitions.erase(std::unique(partitions.begin(), partitions.end()),
                   partitions.end());
  w.partitions_ = std::move(partitions);
  ASSIGN_OR_RETURN(w.table_existed_, db->TableExists(dataset.table));
  if (w.table_existed_) {
    ASSIGN_OR_RETURN(TableShape shape, ShapeOf(db, dataset));
    ASSIGN_OR_RETURN(std::optional<Stored> stored,
                     ReadStatsMeta(db, dataset.name));
    ASSIGN_OR_RETURN(w.current_, IsCurrent(db, dataset, shape, stored));
    if (w.current_) {
      ASSIGN_OR_RETURN(w.before_, CountPartitions(db, dataset, w.partitions_));
    }
  }
  return w;
}

absl::Status StatsWrite::Finish(Database* db, absl::Time now) {
  const DatasetSpec& ds = *dataset_;
  const int64_t now_us = absl::ToUnixMicros(now);
  ASSIGN_OR_RETURN(std::optional<Stored> stored, ReadStatsMeta(db, ds.name));
  if (table_existed_ && !current_) {
    // Not known to be right before the write: counted in full next time.
    return stored ? DeleteStats(db, ds.name) : absl::OkStatus();
  }
  ASSIGN_OR_RETURN(TableShape shape, ShapeOf(db, ds));
  if (!shape.exists || shape.rowid.empty()) return DeleteStats(db, ds.name);
  ASSIGN_OR_RETURN(std::vector<int64_t> after,
                   CountPartitions(db, ds, partitions_));
  int64_t total = 0;
  int64_t recounted_at = now_us;
  if (table_existed_) {
    total = stored->total;  // current_ implies stored
    recounted_at = stored->recounted_at;
    for (size_t i = 0; i < after.size(); ++i) total += after[i] - before_[i];
  } else {
    // Created by this write: its rows are the partitions' rows.
    RETURN_IF_ERROR(DeleteStats(db, ds.name));
    for (int64_t n : after) total += n;
  }
  RETURN_IF_ERROR(WriteRows(db, ds.name, partitions_, after));
  ASSIGN_OR_RETURN(Stored next,
                   MetaOfTable(db, ds, shape, total, recounted_at, now_us));
  return WriteStatsMeta(db, ds.name, next);
}

}  // namespace backfill::sqlite
