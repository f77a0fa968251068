#include "storage/sql/change_signal.h"

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/model/fingerprint.h"
#include "core/model/partition.h"
#include "spdlog/spdlog.h"
#include "storage/sql/dialect.h"
#include "storage/sql/engine_checks.h"

namespace backfill::sql {
namespace {

// More partitions missing than this are hashed in one scan of the table.
constexpr size_t kScanAbove = 16;

std::string NewEpoch() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  return absl::StrFormat("%016x", gen());
}

// What a cached fingerprint depends on besides the rows: the table, the
// columns hashed and the partitioning.
std::string ShapeOf(const DatasetSpec& ds) {
  return absl::StrCat(ds.table, "|", ColumnList(ds), "|",
                      ds.partition ? GrainName(ds.partition->grain) : "", "|",
                      ds.partition ? ds.partition->column : "", "|",
                      ds.partition ? ds.partition->key_column : "");
}

InputFingerprint Made(const DatasetSpec& ds, const std::string& partition,
                      const Fingerprint& fp) {
  InputFingerprint f;
  f.dataset = ds.name;
  f.partition = partition;
  f.fingerprint = fp.ToString();
  f.rows = fp.rows();
  return f;
}

// The stored installation of the table: (epoch, identity).
absl::StatusOr<std::optional<std::pair<std::string, std::string>>> Installed(
    Connection* conn, const DatasetSpec& ds) {
  const Dialect& d = conn->dialect();
  ASSIGN_OR_RETURN(Result r,
                   conn->Exec(absl::StrCat("SELECT epoch, identity FROM ",
                                           d.Name(d.ChangeTables()),
                                           " WHERE tbl = ", d.Placeholder(1)),
                              {ds.table}));
  if (r.rows.empty()) {
    return std::optional<std::pair<std::string, std::string>>();
  }
  return std::make_optional(
      std::make_pair(r.rows[0][0].text, r.rows[0][1].text));
}

// The table's counters by bucket.
absl::StatusOr<std::map<std::string, int64_t>> Counters(Connection* conn,
                                                        const DatasetSpec& ds) {
  const Dialect& d = conn->dialect();
  std::map<std::string, int64_t> out;
  RETURN_IF_ERROR(conn->ForEachRow(
      absl::StrCat("SELECT bucket, n FROM ", d.Name(d.ChangeCounts()),
                   " WHERE tbl = ", d.Placeholder(1)),
      {ds.table}, [&](const Row& row) {
        out[row[0].text] = row[1].integer;
        return absl::OkStatus();
      }));
  return out;
}

absl::StatusOr<PartitionSignal> SignalOf(
    const Dialect& d, const DatasetSpec& ds, const std::string& epoch,
    const std::map<std::string, int64_t>& counters,
    const std::string& partition) {
  PartitionSignal s;
  s.epoch = epoch;
  if (partition.empty()) {
    for (const auto& [bucket, n] : counters) s.counter += n;
    return s;
  }
  ASSIGN_OR_RETURN(std::string bucket, d.ChangeBucket(ds, partition));
  auto it = counters.find(bucket);
  s.counter = it == counters.end() ? 0 : it->second;
  return s;
}

struct CacheRow {
  std::string shape, epoch;
  int64_t counter = 0;
  InputFingerprint fingerprint;
};

CacheRow CacheRowOf(const DatasetSpec& ds, const Row& row) {
  CacheRow c;
  c.fingerprint.dataset = ds.name;
  c.fingerprint.partition = row[0].text;
  c.shape = row[1].text;
  c.epoch = row[2].text;
  c.counter = row[3].integer;
  c.fingerprint.fingerprint = row[4].text;
  c.fingerprint.rows = row[5].integer;
  return c;
}

constexpr char kCacheColumns[] =
    "\"partition\", shape, epoch, counter, fingerprint, \"rows\"";

bool Stands(const CacheRow& c, const std::string& shape,
            const PartitionSignal& s) {
  return c.shape == shape && c.epoch == s.epoch && c.counter == s.counter;
}

}  // namespace

absl::Status CreateChangeSignalTables(Connection* conn) {
  const Dialect& d = conn->dialect();
  RETURN_IF_ERROR(
      conn->Exec(absl::StrCat("CREATE TABLE IF NOT EXISTS ",
                              d.Name(d.ChangeTables()),
                              " (tbl TEXT PRIMARY KEY, epoch TEXT NOT NULL, "
                              "identity TEXT NOT NULL)"))
          .status());
  RETURN_IF_ERROR(
      conn->Exec(absl::StrCat("CREATE TABLE IF NOT EXISTS ",
                              d.Name(d.ChangeCounts()),
                              " (tbl TEXT NOT NULL, bucket TEXT NOT NULL, n "
                              "BIGINT NOT NULL, PRIMARY KEY (tbl, bucket))"))
          .status());
  RETURN_IF_ERROR(
      conn
          ->Exec(absl::StrCat(
              "CREATE TABLE IF NOT EXISTS ", d.Name(d.FingerprintCache()),
              " (dataset TEXT NOT NULL, \"partition\" TEXT NOT NULL, shape "
              "TEXT NOT NULL, epoch TEXT NOT NULL, counter BIGINT NOT "
              "NULL, fingerprint TEXT NOT NULL, \"rows\" BIGINT NOT NULL, "
              "PRIMARY KEY (dataset, \"partition\"))"))
          .status());
  return absl::OkStatus();
}

absl::StatusOr<bool> EnsureChangeSignal(Connection* conn,
                                        const DatasetSpec& ds) {
  const Dialect& d = conn->dialect();
  {
    ASSIGN_OR_RETURN(Transaction txn,
                     Transaction::Begin(conn, TxnMode::kSnapshot));
    ASSIGN_OR_RETURN(std::optional<std::string> epoch, KnownEpoch(conn, ds));
    RETURN_IF_ERROR(txn.Commit());
    if (epoch) return true;
  }
  absl::Status installed = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(Transaction txn,
                     Transaction::Begin(conn, TxnMode::kWrite));
    ASSIGN_OR_RETURN(std::optional<std::string> epoch, KnownEpoch(conn, ds));
    if (epoch) return txn.Commit();  // installed meanwhile
    const std::string next = NewEpoch();
    ASSIGN_OR_RETURN(std::vector<std::string> statements,
                     d.ChangeTriggerSql(conn, ds, next));
    if (statements.empty()) {
      return absl::FailedPreconditionError("the table cannot carry triggers");
    }
    for (const std::string& s : statements) {
      RETURN_IF_ERROR(conn->Exec(s).status());
    }
    ASSIGN_OR_RETURN(std::string identity, d.ChangeIdentity(conn, ds));
    RETURN_IF_ERROR(
        conn->Exec(absl::StrCat("DELETE FROM ", d.Name(d.ChangeCounts()),
                                " WHERE tbl = ", d.Placeholder(1)),
                   {ds.table})
            .status());
    RETURN_IF_ERROR(
        conn->Exec(absl::StrCat("DELETE FROM ", d.Name(d.ChangeTables()),
                                " WHERE tbl = ", d.Placeholder(1)),
                   {ds.table})
            .status());
    RETURN_IF_ERROR(
        conn->Exec(absl::StrCat("INSERT INTO ", d.Name(d.ChangeTables()),
                                " (tbl, epoch, identity) VALUES (",
                                d.Placeholder(1), ", ", d.Placeholder(2), ", ",
                                d.Placeholder(3), ")"),
                   {ds.table, next, identity})
            .status());
    return txn.Commit();
  }();
  if (!installed.ok()) {
    spdlog::warn(
        "{}: no change signal on table {} (its fingerprints are hashed on "
        "every read): {}",
        ds.name, ds.table, installed.ToString());
    return false;
  }
  return true;
}

absl::StatusOr<std::optional<std::string>> KnownEpoch(Connection* conn,
                                                      const DatasetSpec& ds) {
  const Dialect& d = conn->dialect();
  using Stored = std::optional<std::pair<std::string, std::string>>;
  ASSIGN_OR_RETURN(Stored installed, Installed(conn, ds));
  if (!installed) return std::optional<std::string>();
  ASSIGN_OR_RETURN(std::string identity, d.ChangeIdentity(conn, ds));
  if (identity.empty() || identity != installed->second) {
    return std::optional<std::string>();
  }
  return std::make_optional(installed->first);
}

absl::StatusOr<PartitionSignal> ReadPartitionSignal(
    Connection* conn, const DatasetSpec& ds, const std::string& epoch,
    const std::string& partition) {
  const Dialect& d = conn->dialect();
  PartitionSignal s;
  s.epoch = epoch;
  if (partition.empty()) {
    using Counts = std::map<std::string, int64_t>;
    ASSIGN_OR_RETURN(Counts counters, Counters(conn, ds));
    return SignalOf(d, ds, epoch, counters, partition);
  }
  ASSIGN_OR_RETURN(std::string bucket, d.ChangeBucket(ds, partition));
  ASSIGN_OR_RETURN(
      Result r,
      conn->Exec(absl::StrCat("SELECT n FROM ", d.Name(d.ChangeCounts()),
                              " WHERE tbl = ", d.Placeholder(1),
                              " AND bucket = ", d.Placeholder(2)),
                 {ds.table, bucket}));
  if (!r.rows.empty()) s.counter = r.rows[0][0].integer;
  return s;
}

absl::StatusOr<std::optional<InputFingerprint>> CachedFingerprint(
    Connection* conn, const DatasetSpec& ds, const std::string& partition,
    const PartitionSignal& signal) {
  const Dialect& d = conn->dialect();
  ASSIGN_OR_RETURN(
      Result r,
      conn->Exec(absl::StrCat("SELECT ", kCacheColumns, " FROM ",
                              d.Name(d.FingerprintCache()),
                              " WHERE dataset = ", d.Placeholder(1),
                              " AND \"partition\" = ", d.Placeholder(2)),
                 {ds.name, partition}));
  if (r.rows.empty()) return std::optional<InputFingerprint>();
  CacheRow c = CacheRowOf(ds, r.rows[0]);
  if (!Stands(c, ShapeOf(ds), signal)) {
    return std::optional<InputFingerprint>();
  }
  return std::make_optional(std::move(c.fingerprint));
}

absl::Status StoreFingerprints(Connection* conn,
                               const std::vector<SignalledFingerprint>& items) {
  if (items.empty()) return absl::OkStatus();
  const Dialect& d = conn->dialect();
  std::string values;
  for (int i = 1; i <= 7; ++i) {
    absl::StrAppend(&values, i > 1 ? ", " : "", d.Placeholder(i));
  }
  const std::string sql = absl::StrCat(
      "INSERT INTO ", d.Name(d.FingerprintCache()), " (dataset, ",
      kCacheColumns, ") VALUES (", values,
      ") ON CONFLICT (dataset, \"partition\") DO UPDATE SET shape = "
      "excluded.shape, epoch = excluded.epoch, counter = excluded.counter, "
      "fingerprint = excluded.fingerprint, \"rows\" = excluded.\"rows\"");
  // In one order, so that two writers sharing rows lock them alike.
  std::vector<const SignalledFingerprint*> sorted;
  for (const SignalledFingerprint& item : items) sorted.push_back(&item);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    return std::tie(a->dataset->name, a->fingerprint.partition) <
           std::tie(b->dataset->name, b->fingerprint.partition);
  });
  for (const SignalledFingerprint* p : sorted) {
    const SignalledFingerprint& item = *p;
    const InputFingerprint& f = item.fingerprint;
    RETURN_IF_ERROR(conn->Exec(sql, {item.dataset->name, f.partition,
                                     ShapeOf(*item.dataset), item.signal.epoch,
                                     Param::Int(item.signal.counter),
                                     f.fingerprint, Param::Int(f.rows)})
                        .status());
  }
  return absl::OkStatus();
}

absl::StatusOr<SignalledRead> SignalledFingerprints(
    Connection* conn, const DatasetSpec& ds,
    const std::vector<std::string>& partitions, bool install) {
  const Dialect& d = conn->dialect();
  for (const std::string& p : partitions) {
    if (p.empty()) continue;
    if (!ds.partition) {
      return absl::InvalidArgumentError(
          absl::StrCat("dataset ", ds.name, " is unpartitioned: partition '", p,
                       "' does not exist; ask for \"\" (the whole table)"));
    }
    RETURN_IF_ERROR(CheckPartition(ds, p));
  }
  const Relation table = d.Published(ds);
  SignalledRead out;
  bool signalled = false;
  {
    ASSIGN_OR_RETURN(Transaction txn,
                     Transaction::Begin(conn, TxnMode::kSnapshot));
    ASSIGN_OR_RETURN(bool exists, conn->Exists(table));
    RETURN_IF_ERROR(txn.Commit());
    if (exists && install) {
      ASSIGN_OR_RETURN(signalled, EnsureChangeSignal(conn, ds));
      out.refused = !signalled;
    }
  }
  std::vector<SignalledFingerprint> to_store;
  const std::string shape = ShapeOf(ds);
  {
    ASSIGN_OR_RETURN(Transaction txn,
                     Transaction::Begin(conn, TxnMode::kSnapshot));
    ASSIGN_OR_RETURN(bool exists, conn->Exists(table));
    if (!exists) {
      for (const std::string& p : partitions) {
        out.fingerprints[p] = Made(ds, p, Fingerprint());
      }
      RETURN_IF_ERROR(txn.Commit());
      return out;
    }
    std::optional<std::string> epoch;
    if (signalled) {
      ASSIGN_OR_RETURN(epoch, KnownEpoch(conn, ds));
    }
    out.signalled = epoch.has_value();
    std::map<std::string, int64_t> counters;
    std::map<std::string, CacheRow> cached;
    if (epoch) {
      ASSIGN_OR_RETURN(counters, Counters(conn, ds));
      RETURN_IF_ERROR(
          conn->ForEachRow(absl::StrCat("SELECT ", kCacheColumns, " FROM ",
                                        d.Name(d.FingerprintCache()),
                                        " WHERE dataset = ", d.Placeholder(1)),
                           {ds.name}, [&](const Row& row) {
                             CacheRow c = CacheRowOf(ds, row);
                             cached[c.fingerprint.partition] = std::move(c);
                             return absl::OkStatus();
                           }));
    }
    std::set<std::string> missing;
    std::map<std::string, PartitionSignal> signals;
    for (const std::string& p : partitions) {
      if (epoch) {
        ASSIGN_OR_RETURN(PartitionSignal s,
                         SignalOf(d, ds, *epoch, counters, p));
        auto it = cached.find(p);
        if (it != cached.end() && Stands(it->second, shape, s)) {
          out.fingerprints[p] = it->second.fingerprint;
          ++out.cached;
          continue;
        }
        signals[p] = s;
      }
      missing.insert(p);
    }
    std::unique_ptr<Membership> member;
    if (ds.partition) {
      ASSIGN_OR_RETURN(member, d.MembershipOf(conn, ds, ""));
    }
    const std::string from = absl::StrCat("FROM ", d.Name(table));
    const size_t parts = missing.size() - missing.count("");
    std::map<std::string, Fingerprint> scanned;
    if (member != nullptr && parts > kScanAbove) {
      ASSIGN_OR_RETURN(
          scanned,
          conn->HashRowsByGroup(ColumnList(ds), member->Expression(), from));
    }
    for (const std::string& p : missing) {
      Fingerprint fp;
      if (p.empty() || member == nullptr) {
        ASSIGN_OR_RETURN(fp, conn->HashRows(ColumnList(ds), from));
      } else if (parts > kScanAbove) {
        auto it = scanned.find(p);
        if (it != scanned.end()) fp = it->second;
      } else {
        ASSIGN_OR_RETURN(Params values, member->Values(p));
        ASSIGN_OR_RETURN(fp, conn->HashRows(ColumnList(ds),
                                            absl::StrCat(from, " WHERE ",
                                                         member->Condition(1)),
                                            values));
      }
      InputFingerprint f = Made(ds, p, fp);
      ++out.hashed;
      if (epoch) to_store.push_back({&ds, f, signals[p]});
      out.fingerprints[p] = std::move(f);
    }
    RETURN_IF_ERROR(txn.Commit());
  }
  if (!to_store.empty()) {
    absl::Status stored = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(Transaction txn,
                       Transaction::Begin(conn, TxnMode::kWrite));
      RETURN_IF_ERROR(StoreFingerprints(conn, to_store));
      return txn.Commit();
    }();
    if (!stored.ok()) {
      spdlog::warn("{}: fingerprints not cached: {}", ds.name,
                   stored.ToString());
    }
  }
  return out;
}

}  // namespace backfill::sql
