#include "storage/sqlite/sqlite_partition_fingerprints.h"

#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/model/fingerprint.h"
#include "core/model/partition.h"
#include "spdlog/spdlog.h"
#include "storage/sqlite/sqlite_membership.h"

namespace backfill::sqlite {
namespace {

// What StagePartition reads of an input: the contract columns, or every
// column of a source that declares none.
std::string ColumnList(const DatasetSpec& ds) {
  if (ds.columns.empty()) return "*";
  std::vector<std::string> cols;
  for (const ColumnSpec& c : ds.columns)
    cols.push_back(QuoteIdentifier(c.name));
  return absl::StrJoin(cols, ", ");
}

struct Cached {
  std::string fingerprint;
  int64_t rows = 0;
};
using CachedMap = std::map<std::string, Cached>;

struct FingerprintMeta {
  std::string signature;
  int64_t max_rowid = 0;
  int64_t min_rowid = 0;
  std::string last_row;
  int64_t computed_at = 0;  // unix micros
  bool operator==(const FingerprintMeta& o) const {
    return signature == o.signature && max_rowid == o.max_rowid &&
           min_rowid == o.min_rowid && last_row == o.last_row &&
           computed_at == o.computed_at;
  }
};

absl::StatusOr<std::optional<FingerprintMeta>> ReadFingerprintMeta(
    Database* db, const std::string& dataset) {
  ASSIGN_OR_RETURN(
      Statement q,
      db->Prepare(absl::StrCat(
          "SELECT signature, max_rowid, min_rowid, last_row, "
          "computed_at FROM main.",
          QuoteIdentifier(kFingerprintsMetaTable), " WHERE dataset = ?1")));
  RETURN_IF_ERROR(q.BindText(1, dataset));
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return std::optional<FingerprintMeta>();
  FingerprintMeta m;
  m.signature = q.ColumnText(0);
  m.max_rowid = q.ColumnInt(1);
  m.min_rowid = q.ColumnInt(2);
  m.last_row = q.ColumnText(3);
  m.computed_at = q.ColumnInt(4);
  return std::optional<FingerprintMeta>(std::move(m));
}

absl::StatusOr<std::map<std::string, Cached>> ReadCached(
    Database* db, const std::string& dataset) {
  ASSIGN_OR_RETURN(
      Statement q,
      db->Prepare(absl::StrCat(
          "SELECT \"partition\", fingerprint, rows FROM main.",
          QuoteIdentifier(kFingerprintsTable), " WHERE dataset = ?1")));
  RETURN_IF_ERROR(q.BindText(1, dataset));
  std::map<std::string, Cached> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    out[q.ColumnText(0)] = Cached{q.ColumnText(1), q.ColumnInt(2)};
  }
  return out;
}

absl::Status DeleteAll(Database* db, const std::string& dataset) {
  for (const char* table : {kFingerprintsTable, kFingerprintsMetaTable}) {
    ASSIGN_OR_RETURN(
        Statement q,
        db->Prepare(absl::StrCat("DELETE FROM main.", QuoteIdentifier(table),
                                 " WHERE dataset = ?1")));
    RETURN_IF_ERROR(q.BindText(1, dataset));
    RETURN_IF_ERROR(q.Run());
  }
  return absl::OkStatus();
}

// Sets the cached fingerprint of each partition (no rows: removed).
absl::Status WriteCached(Database* db, const std::string& dataset,
                         const std::map<std::string, Cached>& partitions) {
  ASSIGN_OR_RETURN(
      Statement put,
      db->Prepare(absl::StrCat("INSERT OR REPLACE INTO main.",
                               QuoteIdentifier(kFingerprintsTable),
                               " (dataset, \"partition\", fingerprint, rows) "
                               "VALUES (?1, ?2, ?3, ?4)")));
  ASSIGN_OR_RETURN(Statement del,
                   db->Prepare(absl::StrCat(
                       "DELETE FROM main.", QuoteIdentifier(kFingerprintsTable),
                       " WHERE dataset = ?1 AND \"partition\" "
                       "= ?2")));
  for (const auto& [partition, c] : partitions) {
    Statement& q = c.rows > 0 ? put : del;
    RETURN_IF_ERROR(q.Reset());
    RETURN_IF_ERROR(q.BindText(1, dataset));
    RETURN_IF_ERROR(q.BindText(2, partition));
    if (c.rows > 0) {
      RETURN_IF_ERROR(q.BindText(3, c.fingerprint));
      RETURN_IF_ERROR(q.BindInt(4, c.rows));
    }
    RETURN_IF_ERROR(q.Run());
  }
  return absl::OkStatus();
}

absl::Status WriteFingerprintMeta(Database* db, const std::string& dataset,
                                  const FingerprintMeta& m) {
  ASSIGN_OR_RETURN(Statement q,
                   db->Prepare(absl::StrCat(
                       "INSERT OR REPLACE INTO main.",
                       QuoteIdentifier(kFingerprintsMetaTable),
                       " (dataset, signature, max_rowid, min_rowid, last_row, "
                       "computed_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")));
  RETURN_IF_ERROR(q.BindText(1, dataset));
  RETURN_IF_ERROR(q.BindText(2, m.signature));
  RETURN_IF_ERROR(q.BindInt(3, m.max_rowid));
  RETURN_IF_ERROR(q.BindInt(4, m.min_rowid));
  RETURN_IF_ERROR(q.BindText(5, m.last_row));
  RETURN_IF_ERROR(q.BindInt(6, m.computed_at));
  return q.Run();
}

// One partition's rows hashed as StagePartition hashes an input partition.
absl::StatusOr<Cached> HashPartition(Database* db, const DatasetSpec& ds,
                                     const std::string& partition) {
  ASSIGN_OR_RETURN(Statement q, db->Prepare(absl::StrCat(
                                    "SELECT ", ColumnList(ds), " FROM main.",
                                    QuoteIdentifier(ds.table), " WHERE ",
                                    MembershipConditionParams(ds))));
  RETURN_IF_ERROR(BindMembership(q, ds, partition));
  ASSIGN_OR_RETURN(Fingerprint fp, HashRows(q));
  return Cached{fp.ToString(), fp.rows()};
}

// Every partition of the table in one scan (rows of no partition skipped).
absl::StatusOr<std::map<std::string, Cached>> HashEveryPartition(
    Database* db, const DatasetSpec& ds) {
  ASSIGN_OR_RETURN(Statement q,
                   db->Prepare(absl::StrCat(
                       "SELECT ", ColumnList(ds), ", ", PartitionExpression(ds),
                       " FROM main.", QuoteIdentifier(ds.table))));
  const int n = q.ColumnCount() - 1;
  std::map<std::string, Fingerprint> sums;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    if (q.ColumnIsNull(n)) continue;
    sums[q.ColumnText(n)].AddRow(HashCurrentRow(q, n));
  }
  std::map<std::string, Cached> out;
  for (const auto& [p, fp] : sums) out[p] = Cached{fp.ToString(), fp.rows()};
  return out;
}

}  // namespace

absl::Status CreatePartitionFingerprintTables(Database* db) {
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db));
  RETURN_IF_ERROR(db->Exec(absl::StrCat(
      "CREATE TABLE IF NOT EXISTS main.", QuoteIdentifier(kFingerprintsTable),
      " (dataset TEXT NOT NULL, \"partition\" TEXT NOT NULL, fingerprint TEXT "
      "NOT NULL, rows INTEGER NOT NULL, PRIMARY KEY (dataset, \"partition\")) "
      "WITHOUT ROWID")));
  RETURN_IF_ERROR(db->Exec(absl::StrCat(
      "CREATE TABLE IF NOT EXISTS main.",
      QuoteIdentifier(kFingerprintsMetaTable),
      " (dataset TEXT PRIMARY KEY, signature TEXT NOT NULL, max_rowid INTEGER "
      "NOT NULL, min_rowid INTEGER NOT NULL, last_row TEXT NOT NULL, "
      "computed_at INTEGER NOT NULL)")));
  return txn.Commit();
}

absl::Status DropPartitionFingerprints(Database* db,
                                       const std::string& dataset) {
  return DeleteAll(db, dataset);
}

absl::StatusOr<FingerprintRefresh> CurrentPartitionFingerprints(
    Database* db, const DatasetSpec& ds,
    const std::vector<std::string>& partitions, const StatsPolicy& policy,
    absl::Time now) {
  std::set<std::string> wanted;
  bool whole = false;
  for (const std::string& p : partitions) {
    if (p.empty()) {
      whole = true;
      continue;
    }
    if (!ds.partition) {
      return absl::InvalidArgumentError(
          absl::StrCat("dataset ", ds.name, " is unpartitioned: partition '", p,
                       "' does not exist; ask for \"\" (the whole table)"));
    }
    RETURN_IF_ERROR(ValidatePartition(ds.layout(), p));
    wanted.insert(p);
  }
  const int64_t now_us = absl::ToUnixMicros(now);
  enum class Write { kNone, kDrop, kAll, kDelta };
  Write write = Write::kNone;
  FingerprintRefresh out;
  std::optional<FingerprintMeta> base;
  FingerprintMeta next;
  std::map<std::string, Cached> changed;  // kAll: every partition
  const Fingerprint empty;
  auto put = [&](const std::string& p, const Cached* c) {
    InputFingerprint f;
    f.dataset = ds.name;
    f.partition = p;
    f.fingerprint = c != nullptr ? c->fingerprint : empty.ToString();
    f.rows = c != nullptr ? c->rows : 0;
    out.fingerprints[p] = std::move(f);
  };
  {
    ASSIGN_OR_RETURN(Transaction txn,
                     Transaction::Begin(db, Transaction::Mode::kDeferred));
    ASSIGN_OR_RETURN(TableSignal signal, ReadTableSignal(db, ds));
    ASSIGN_OR_RETURN(base, ReadFingerprintMeta(db, ds.name));
    if (!signal.exists) {
      if (whole) put("", nullptr);
      for (const std::string& p : wanted) put(p, nullptr);
      if (base) write = Write::kDrop;
    } else {
      if (whole) {
        ASSIGN_OR_RETURN(
            Statement q,
            db->Prepare(absl::StrCat("SELECT ", ColumnList(ds), " FROM main.",
                                     QuoteIdentifier(ds.table))));
        ASSIGN_OR_RETURN(Fingerprint fp, HashRows(q));
        const Cached c{fp.ToString(), fp.rows()};
        put("", &c);
      }
      if (!wanted.empty() && signal.rowid.empty()) {
        out.refresh = "uncached";
        for (const std::string& p : wanted) {
          ASSIGN_OR_RETURN(Cached c, HashPartition(db, ds, p));
          put(p, &c);
          ++out.partitions_hashed;
        }
        if (base) write = Write::kDrop;
      } else if (!wanted.empty()) {
        bool recompute = true;
        if (base && base->signature == signal.signature &&
            policy.max_age > absl::ZeroDuration() &&
            now - absl::FromUnixMicros(base->computed_at) < policy.max_age &&
            signal.min_rowid == base->min_rowid &&
            signal.max_rowid >= base->max_rowid) {
          ASSIGN_OR_RETURN(
              std::string last,
              RowFingerprintAt(db, ds, signal.rowid, base->max_rowid));
          if (last == base->last_row) {
            recompute = false;
            ASSIGN_OR_RETURN(CachedMap cached, ReadCached(db, ds.name));
            out.refresh = "current";
            if (signal.max_rowid > base->max_rowid) {
              // Appended since: hash again the partitions the new rows
              // fall in.
              ASSIGN_OR_RETURN(Statement q,
                               db->Prepare(absl::StrCat(
                                   "SELECT DISTINCT ", PartitionExpression(ds),
                                   " FROM main.", QuoteIdentifier(ds.table),
                                   " WHERE ", signal.rowid, " > ?1")));
              RETURN_IF_ERROR(q.BindInt(1, base->max_rowid));
              std::set<std::string> touched;
              while (true) {
                ASSIGN_OR_RETURN(bool row, q.Step());
                if (!row) break;
                if (q.ColumnIsNull(0)) continue;
                std::string p = q.ColumnText(0);
                // A time x key row of an undeclared key is in no
                // partition a job can read.
                if (ds.two_dimensional() &&
                    !ValidatePartition(ds.layout(), p).ok()) {
                  continue;
                }
                touched.insert(std::move(p));
              }
              for (const std::string& p : touched) {
                ASSIGN_OR_RETURN(Cached c, HashPartition(db, ds, p));
                changed[p] = c;
                cached[p] = std::move(c);
                ++out.partitions_hashed;
              }
              out.refresh = "appended";
              next = *base;
              next.max_rowid = signal.max_rowid;
              ASSIGN_OR_RETURN(
                  next.last_row,
                  RowFingerprintAt(db, ds, signal.rowid, signal.max_rowid));
              write = Write::kDelta;
            }
            for (const std::string& p : wanted) {
              auto it = cached.find(p);
              put(p, it == cached.end() || it->second.rows == 0 ? nullptr
                                                                : &it->second);
            }
          }
        }
        if (recompute) {
          ASSIGN_OR_RETURN(changed, HashEveryPartition(db, ds));
          out.refresh = "recompute";
          out.partitions_hashed = static_cast<int64_t>(changed.size());
          for (const std::string& p : wanted) {
            auto it = changed.find(p);
            put(p, it == changed.end() ? nullptr : &it->second);
          }
          next.signature = signal.signature;
          next.max_rowid = signal.max_rowid;
          next.min_rowid = signal.min_rowid;
          next.computed_at = now_us;
          ASSIGN_OR_RETURN(next.last_row, RowFingerprintAt(db, ds, signal.rowid,
                                                           signal.max_rowid));
          write = Write::kAll;
        }
      }
    }
    RETURN_IF_ERROR(txn.Commit());
  }
  if (write == Write::kNone) return out;
  absl::Status persisted = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db));
    ASSIGN_OR_RETURN(std::optional<FingerprintMeta> stored,
                     ReadFingerprintMeta(db, ds.name));
    if (stored.has_value() != base.has_value() ||
        (stored && !(*stored == *base))) {
      return absl::OkStatus();  // written meanwhile: theirs stands
    }
    switch (write) {
      case Write::kNone:
        break;
      case Write::kDrop:
        RETURN_IF_ERROR(DeleteAll(db, ds.name));
        break;
      case Write::kAll:
        RETURN_IF_ERROR(DeleteAll(db, ds.name));
        RETURN_IF_ERROR(WriteCached(db, ds.name, changed));
        RETURN_IF_ERROR(WriteFingerprintMeta(db, ds.name, next));
        break;
      case Write::kDelta:
        RETURN_IF_ERROR(WriteCached(db, ds.name, changed));
        RETURN_IF_ERROR(WriteFingerprintMeta(db, ds.name, next));
        break;
    }
    return txn.Commit();
  }();
  if (!persisted.ok()) {
    spdlog::warn("{}: partition fingerprints not saved: {}", ds.name,
                 persisted.ToString());
  }
  return out;
}

}  // namespace backfill::sqlite
