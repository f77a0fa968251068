#include "storage/sql/rollback.h"

#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/model/fingerprint.h"
#include "storage/sql/artifacts.h"
#include "storage/sql/dialect.h"
#include "storage/sql/engine_checks.h"
#include "storage/sql/markers.h"

namespace backfill::sql {

absl::Status MeasurePartitions(Connection* conn, const JobLayout::Item& item,
                               std::vector<RestoredPartition>* out,
                               int64_t* rows) {
  const Dialect& d = conn->dialect();
  const DatasetSpec& ds = *item.dataset;
  const Relation table = d.Published(ds);
  ASSIGN_OR_RETURN(bool exists, conn->Exists(table));
  std::unique_ptr<Membership> member;
  if (exists) {
    ASSIGN_OR_RETURN(member, d.MembershipOf(conn, ds, ""));
  }
  for (const std::string& partition : item.partitions) {
    Fingerprint fp;
    if (exists) {
      ASSIGN_OR_RETURN(Params values, member->Values(partition));
      ASSIGN_OR_RETURN(
          fp, conn->HashRows(ColumnList(ds),
                             absl::StrCat("FROM ", d.Name(table), " WHERE ",
                                          member->Condition(1)),
                             values));
    }
    out->push_back({ds.name, partition, fp.rows(), fp.ToString()});
    *rows += fp.rows();
  }
  return absl::OkStatus();
}

absl::StatusOr<RollbackResult> Rollback(Connection* conn, ReplaceHooks& hooks,
                                        const std::string& owner,
                                        const RollbackSpec& spec,
                                        std::optional<int64_t> fence) {
  const Dialect& d = conn->dialect();
  const JobLayout& layout = spec.layout;
  for (const JobLayout::Item& item : layout.items) {
    if (item.dataset == nullptr) {
      return absl::InvalidArgumentError("Rollback: item without dataset");
    }
    RETURN_IF_ERROR(CheckWritable(d, *item.dataset));
  }
  for (const std::string& with : spec.marker.with_jobs) {
    if (with.empty() || with.find(',') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("Rollback: malformed job id \"", with, "\""));
    }
  }
  const std::string& job_id = layout.job_id;
  const std::string what = absl::StrCat("rollback of job ", job_id);
  RETURN_IF_ERROR(hooks.CheckWarehouse());
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn, TxnMode::kWrite));
  RollbackResult result;
  ASSIGN_OR_RETURN(bool done, HasRollback(conn, owner, job_id));
  if (done) {
    // Rolled back before (e.g. by a process that crashed before recording
    // it): nothing is restored twice.
    for (const JobLayout::Item& item : layout.items) {
      RETURN_IF_ERROR(
          MeasurePartitions(conn, item, &result.partitions, &result.rows));
    }
    RETURN_IF_ERROR(txn.Commit());
    result.already = true;
    return result;
  }
  ASSIGN_OR_RETURN(bool published, HasPublication(conn, owner, job_id));
  if (!published) {
    return absl::FailedPreconditionError(absl::StrCat(
        what,
        ": the warehouse holds no publication of it by this state store; "
        "nothing was restored"));
  }
  if (!owner.empty()) {
    RETURN_IF_ERROR(CheckOwner(conn, owner, what, "restored"));
  }
  if (fence.has_value()) {
    RETURN_IF_ERROR(CheckFence(conn, job_id, *fence, what, "restored"));
  }
  for (const JobLayout::Item& item : layout.items) {
    const DatasetSpec& ds = *item.dataset;
    const std::string where = absl::StrCat(what, ", dataset ", ds.name);
    const Relation table = d.Published(ds);
    const Relation copy = d.Copy(job_id, ds.name);
    for (const Relation& t : {copy, table}) {
      ASSIGN_OR_RETURN(bool exists, conn->Exists(t));
      if (!exists) {
        return absl::FailedPreconditionError(
            absl::StrCat(where, ": table ", t.name,
                         t.name == copy.name ? " (the rollback copy)" : "",
                         " does not exist; nothing was restored"));
      }
    }
    ASSIGN_OR_RETURN(std::function<absl::Status()> replaced,
                     hooks.BeforeReplacing(conn, ds, item.partitions));
    RETURN_IF_ERROR(Annotate(hooks.PrepareTable(conn, ds), where));
    // Like the publish, the rollback proves its statements: per partition,
    // every row it deletes and every row it restores belongs to the
    // partition; and every row of the copy is restored into one of the
    // partitions. Any difference rolls the whole transaction back.
    ASSIGN_OR_RETURN(
        int64_t copy_rows,
        conn->Int(absl::StrCat("SELECT COUNT(*) FROM ", d.Name(copy))));
    int64_t restored = 0;
    const std::string cols = ColumnList(ds);
    const std::vector<std::string> whole = {""};
    for (const std::string& partition :
         ds.partition ? item.partitions : whole) {
      ASSIGN_OR_RETURN(
          Dialect::Proven deleted,
          d.WriteProven(conn, ds, table, std::nullopt, cols, partition));
      ASSIGN_OR_RETURN(Dialect::Proven put,
                       d.WriteProven(conn, ds, copy, table, cols, partition));
      if (deleted.affected != deleted.belonging ||
          put.affected != put.belonging) {
        return absl::InternalError(absl::StrCat(
            where, ", partition ", partition, ": the rollback would delete ",
            deleted.affected, " published rows (", deleted.belonging,
            " belong to the partition) and restore ", put.affected, " rows (",
            put.belonging,
            " of the rollback copy belong to it); the transaction was rolled "
            "back and nothing was restored. This is a defect of the engine, "
            "not of the data"));
      }
      restored += put.affected;
    }
    if (restored != copy_rows) {
      return absl::InternalError(absl::StrCat(
          where, ": the rollback copy holds ", copy_rows, " rows but only ",
          restored,
          " belong to the job's partitions; the transaction was rolled back "
          "and nothing was restored"));
    }
    RETURN_IF_ERROR(Annotate(replaced(), where));
    RETURN_IF_ERROR(
        MeasurePartitions(conn, item, &result.partitions, &result.rows));
  }
  // The copies of the job (and of the later jobs rolled back with it) have
  // served: no rollback of these jobs can happen again.
  RETURN_IF_ERROR(DropCopiesOf(conn, job_id));
  for (const std::string& with : spec.marker.with_jobs) {
    RETURN_IF_ERROR(DropCopiesOf(conn, with));
  }
  RETURN_IF_ERROR(
      RecordRollback(conn, owner, job_id, spec.marker, absl::Now()));
  RETURN_IF_ERROR(hooks.CheckWarehouse());
  RETURN_IF_ERROR(Annotate(txn.Commit(), what));
  for (const JobLayout::Item& item : layout.items) {
    hooks.Replaced(*item.dataset);
  }
  return result;
}

}  // namespace backfill::sql
