#include "storage/sql/publish.h"

#include <functional>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/model/fingerprint.h"
#include "core/run/crash_point.h"
#include "storage/sql/dialect.h"
#include "storage/sql/engine_checks.h"
#include "storage/sql/markers.h"

namespace backfill::sql {
namespace {

// A keyed item: in each of its partitions, the published rows of other
// keys must be exactly the rows StagePartition copied into staging
// (compared by their fingerprints), or what the job staged, derived and
// checked is out of date and nothing may be published.
absl::Status CheckOtherKeysUnchanged(Connection* conn, const DatasetSpec& ds,
                                     const JobLayout::Item& item,
                                     const Relation& stage,
                                     const Relation& keys,
                                     const std::string& where) {
  const Dialect& d = conn->dialect();
  ASSIGN_OR_RETURN(std::unique_ptr<Membership> member,
                   d.MembershipOf(conn, ds, ""));
  const std::string others = absl::StrCat(" WHERE ", member->Condition(1),
                                          " AND NOT ", d.InKeys(ds, keys));
  const std::string cols = ColumnList(ds);
  for (const std::string& partition : item.partitions) {
    ASSIGN_OR_RETURN(Params values, member->Values(partition));
    Fingerprint fp[2];
    const Relation from[2] = {d.Published(ds), stage};
    for (int i = 0; i < 2; ++i) {
      ASSIGN_OR_RETURN(
          fp[i],
          conn->HashRows(cols, absl::StrCat("FROM ", d.Name(from[i]), others),
                         values));
    }
    if (fp[0].ToString() != fp[1].ToString()) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, ", partition ", partition,
          ": the rows of other entity keys changed since the job staged the "
          "partition (",
          fp[1].rows(), " rows then, ", fp[0].rows(),
          " now), so what it staged, derived and checked is out of date; "
          "the transaction was rolled back and nothing was published. Submit "
          "the backfill again to recompute from the current rows"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Publish(Connection* conn, ReplaceHooks& hooks,
                     const std::string& owner, const JobLayout& layout,
                     std::optional<int64_t> fence) {
  const Dialect& d = conn->dialect();
  for (const JobLayout::Item& item : layout.items) {
    if (item.dataset == nullptr) {
      return absl::InvalidArgumentError("Publish: item without dataset");
    }
    RETURN_IF_ERROR(CheckWritable(d, *item.dataset));
  }
  const std::string& job_id = layout.job_id;
  const std::string what = absl::StrCat("publish of job ", job_id);
  RETURN_IF_ERROR(hooks.CheckWarehouse());
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn, TxnMode::kWrite));
  ASSIGN_OR_RETURN(bool done, HasPublication(conn, owner, job_id));
  if (done) return absl::OkStatus();  // published before: a no-op
  if (!owner.empty()) {
    // Another state store may have claimed the warehouse since.
    RETURN_IF_ERROR(CheckOwner(conn, owner, what, "published"));
  }
  if (fence.has_value()) {
    // Another replica may have taken the job over since.
    RETURN_IF_ERROR(CheckFence(conn, job_id, *fence, what, "published"));
  }
  for (const JobLayout::Item& item : layout.items) {
    const DatasetSpec& ds = *item.dataset;
    const std::string where = absl::StrCat(what, ", dataset ", ds.name);
    const Relation table = d.Published(ds);
    const Relation stage = d.Stage(job_id, ds.name);
    const Relation parts = d.Parts(job_id, ds.name);
    const Relation keys = d.Keys(job_id, ds.name);
    std::vector<Relation> needed = {stage, parts};
    if (!item.keys.empty()) {
      RETURN_IF_ERROR(CheckItemKeys(item));
      needed.push_back(keys);
    }
    for (const Relation& t : needed) {
      ASSIGN_OR_RETURN(bool exists, conn->Exists(t));
      if (!exists) {
        return absl::FailedPreconditionError(
            absl::StrCat(where, ": staging table ", t.name, " does not exist"));
      }
    }
    ASSIGN_OR_RETURN(std::function<absl::Status()> replaced,
                     hooks.BeforeReplacing(conn, ds, item.partitions));
    ASSIGN_OR_RETURN(std::string defs, d.ColumnDefinitions(ds));
    // The first publish into a dataset creates its table. Publishes of two
    // jobs may both find it missing (replicas of a group publish at once):
    // they take turns (LockRecords, to the end of the transaction), so that
    // the second finds the first's table instead of failing on the
    // catalog's unique keys.
    ASSIGN_OR_RETURN(bool table_exists, conn->Exists(table));
    if (!table_exists) RETURN_IF_ERROR(Annotate(d.LockRecords(conn), where));
    std::string create =
        absl::StrCat("CREATE TABLE IF NOT EXISTS ", d.Name(table), " (", defs);
    if (!ds.primary_key.empty()) {
      std::vector<std::string> pk;
      for (const std::string& k : ds.primary_key)
        pk.push_back(Dialect::Quote(k));
      absl::StrAppend(&create, ", PRIMARY KEY (", absl::StrJoin(pk, ", "), ")");
    }
    create += ")";
    RETURN_IF_ERROR(Annotate(conn->Exec(create).status(), where));
    RETURN_IF_ERROR(Annotate(hooks.PrepareTable(conn, ds), where));
    if (!item.keys.empty()) {
      RETURN_IF_ERROR(
          CheckOtherKeysUnchanged(conn, ds, item, stage, keys, where));
    }
    // The rows this publish replaces go to the rollback copy, then away,
    // partition by partition (through the membership condition, which an
    // index on the partition column serves), so that the cost follows the
    // rows replaced, not the table. Publish proves its deletes: per
    // partition, every row copied for rollback and every row deleted
    // belongs to the partition, and as many were copied as deleted. Any
    // difference rolls the whole transaction back.
    const Relation copy = d.Copy(job_id, ds.name);
    RETURN_IF_ERROR(
        Annotate(conn->Exec(absl::StrCat("DROP TABLE IF EXISTS ", d.Name(copy)))
                     .status(),
                 where));
    RETURN_IF_ERROR(
        Annotate(conn->Exec(absl::StrCat("CREATE TABLE ", d.Name(copy),
                                         " AS SELECT * FROM ", d.Name(table),
                                         " WHERE 1 = 0"))
                     .status(),
                 where));
    const std::vector<std::string> whole = {""};
    for (const std::string& partition :
         ds.partition ? item.partitions : whole) {
      ASSIGN_OR_RETURN(Dialect::Proven copied,
                       d.WriteProven(conn, ds, table, copy, "*", partition));
      ASSIGN_OR_RETURN(
          Dialect::Proven deleted,
          d.WriteProven(conn, ds, table, std::nullopt, "*", partition));
      if (copied.affected != copied.belonging ||
          deleted.affected != deleted.belonging ||
          copied.affected != deleted.affected) {
        return absl::InternalError(absl::StrCat(
            where, ", partition ", partition, ": the publish would delete ",
            deleted.affected, " published rows (", copied.affected,
            " copied for rollback) but ", deleted.belonging,
            " of them belong to the partition; the transaction was rolled "
            "back and nothing was published. This is a defect of the "
            "engine, not of the data: resubmitting fails the same way"));
      }
    }
    RETURN_IF_ERROR(hooks.CheckStaged(conn, ds, stage, parts, where));
    const std::string cols = ColumnList(ds);
    RETURN_IF_ERROR(Annotate(
        conn->Exec(absl::StrCat("INSERT INTO ", d.Name(table), " (", cols,
                                ") SELECT ", cols, " FROM ", d.Name(stage)))
            .status(),
        where));
    RETURN_IF_ERROR(Annotate(replaced(), where));
  }
  RETURN_IF_ERROR(RecordPublication(conn, owner, job_id, absl::Now()));
  // The warehouse must still be the one opened: a commit into a removed or
  // replaced file would publish where nobody reads.
  RETURN_IF_ERROR(hooks.CheckWarehouse());
  CrashPoint("publish.before_commit");
  RETURN_IF_ERROR(Annotate(txn.Commit(), what));
  for (const JobLayout::Item& item : layout.items) {
    hooks.Replaced(*item.dataset);
  }
  return absl::OkStatus();
}

}  // namespace backfill::sql
