#include "storage/sqlite/state/sqlite_state_store.h"

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/base/status_macros.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_fingerprint_function.h"
#include "storage/sqlite/sqlite_wal_checkpointer.h"
#include "storage/sqlite/state/state_governance.h"
#include "storage/sqlite/state/state_jobs.h"
#include "storage/sqlite/state/state_lineage.h"
#include "storage/sqlite/state/state_migrations.h"
#include "storage/sqlite/state/state_queries.h"
#include "storage/sqlite/state/state_record_checksums.h"
#include "storage/sqlite/state/state_tasks.h"

namespace backfill {
namespace {

namespace ss = sqlite_state;

using sqlite::Database;
using sqlite::Transaction;
using sqlite_state::StateDb;

// A file of its own, rather than ":memory:" or a URI: one that has a log
// to checkpoint and that read-only connections can open.
bool IsPlainFile(const std::string& path) {
  return !path.empty() && path != ":memory:" &&
         !absl::StartsWith(path, "file:");
}

// Every record's checksum (state_records::VerifyAll), in a read transaction
// of `db`.
absl::StatusOr<std::string> VerifyRecords(Database* db) {
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db, Transaction::Mode::kDeferred));
  ASSIGN_OR_RETURN(std::string failed, state_records::VerifyAll(db));
  RETURN_IF_ERROR(txn.Commit());
  return failed;
}

// OK, or DATA_LOSS with what to do, when the file at `path` is damaged:
// SQLite's quick_check and (for a schema whose records carry them) every
// record's checksum, which quick_check does not read.
absl::Status CheckIntact(Database* db, const std::string& path) {
  auto damaged = [&path](std::string what) {
    absl::StrReplaceAll({{"\n", "; "}}, &what);
    return absl::DataLossError(absl::StrCat(
        "state store ", path, " is damaged (", what,
        "); backfilld does not write to it. Restore it from a backup "
        "(stop backfilld, replace the file and remove its -wal and -shm "
        "files), or move it away and start once with --adopt-warehouse to "
        "continue with an empty state store (the job history and lineage "
        "it held are then lost)"));
  };
  // The file's schema version first: a file of a schema older than the
  // checksums has none yet (the migration adds them). This first read also
  // recovers the log a crash left, before a second connection reads.
  const absl::StatusOr<int64_t> file_version =
      db->QueryInt("PRAGMA user_version");
  const bool checksummed = file_version.ok() &&
                           *file_version >= ss::kFirstChecksummedVersion &&
                           *file_version <= ss::SchemaVersion();
  // Each check reads the whole file. The checksums are read on a connection
  // of their own while this one runs quick_check: side by side they take
  // about the time of one (a state store of two million partitions: 1.2 s
  // instead of 2.5).
  std::optional<absl::StatusOr<std::string>> records;
  std::thread verifier;
  if (checksummed && IsPlainFile(path)) {
    verifier = std::thread([&records, &path] {
      // A second connection that cannot be opened leaves the checksums to
      // this one, after quick_check, as a file without it would.
      sqlite::OpenOptions options;
      options.create = false;
      absl::StatusOr<std::unique_ptr<Database>> other =
          Database::Open(path, options);
      if (!other.ok() || !sqlite::RegisterRowHashFunction(other->get()).ok()) {
        return;
      }
      records = VerifyRecords(other->get());
    });
  }
  const absl::StatusOr<std::string> check = db->QueryText("PRAGMA quick_check");
  if (verifier.joinable()) verifier.join();
  if (!check.ok() || *check != "ok") {
    return damaged(check.ok() ? absl::StrCat("quick_check: ", *check)
                              : std::string(check.status().message()));
  }
  if (!file_version.ok()) return file_version.status();
  if (!checksummed) return absl::OkStatus();
  if (!records.has_value()) records = VerifyRecords(db);
  const absl::StatusOr<std::string>& failed = *records;
  if (!failed.ok() && failed.status().code() != absl::StatusCode::kDataLoss) {
    return failed.status();
  }
  if (!failed.ok() || !failed->empty()) {
    return damaged(failed.ok() ? *failed
                               : std::string(failed.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace

// ---- running the parts ------------------------------------------------------

StateDb SqliteStateStore::Db() { return StateDb{db_.get(), path_}; }

template <typename Body>
auto SqliteStateStore::InTransaction(sqlite::Transaction::Mode mode,
                                     Body&& body) {
  using Result = decltype(body(std::declval<StateDb>()));
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Transaction> txn = Transaction::Begin(db_.get(), mode);
  if (!txn.ok()) return Result(txn.status());
  Result result = body(Db());
  if (!result.ok()) return result;
  if (absl::Status s = txn->Commit(); !s.ok()) return Result(s);
  return result;
}

template <typename Body>
auto SqliteStateStore::Write(Body&& body) {
  return InTransaction(Transaction::Mode::kImmediate, std::forward<Body>(body));
}

template <typename Body>
auto SqliteStateStore::Read(Body&& body) {
  return InTransaction(Transaction::Mode::kDeferred, std::forward<Body>(body));
}

// ---- opening ----------------------------------------------------------------

int SqliteStateStore::SchemaVersion() { return ss::SchemaVersion(); }

SqliteStateStore::SqliteStateStore(std::unique_ptr<sqlite::Database> db,
                                   std::string path)
    : path_(std::move(path)), db_(std::move(db)) {}

SqliteStateStore::~SqliteStateStore() = default;

absl::StatusOr<std::unique_ptr<SqliteStateStore>> SqliteStateStore::Open(
    const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path));
  RETURN_IF_ERROR(sqlite::RegisterRowHashFunction(db.get()));
  // A damaged file is refused before anything writes to it.
  RETURN_IF_ERROR(CheckIntact(db.get(), path));
  if (path != ":memory:" && !path.empty()) {
    ASSIGN_OR_RETURN(std::string mode,
                     db->QueryText("PRAGMA journal_mode=WAL"));
    if (mode != "wal") {
      return absl::FailedPreconditionError(
          absl::StrCat("state store ", path,
                       ": cannot switch to WAL mode (got ", mode, ")"));
    }
  }
  RETURN_IF_ERROR(db->Exec("PRAGMA synchronous=NORMAL"));
  RETURN_IF_ERROR(db->Exec("PRAGMA foreign_keys=ON"));
  // SQLite's temporary files (the statement journals that the tasks
  // table's triggers and foreign key make each INSERT keep, sorts) in
  // memory: with them on disk, creating a job of 100,000 partitions took
  // twice as long (2.2 s against 1.0 s here), most of it in their writes.
  RETURN_IF_ERROR(db->Exec("PRAGMA temp_store=MEMORY"));
  std::unique_ptr<sqlite::WalCheckpointer> checkpointer;
  if (IsPlainFile(path)) {
    sqlite::WalCheckpointer::Options options;
    options.thread_name = "bf-state-ckpt";
    ASSIGN_OR_RETURN(checkpointer,
                     sqlite::WalCheckpointer::Start(path, options));
    checkpointer->Attach(db.get());
  }
  std::unique_ptr<SqliteStateStore> store(
      new SqliteStateStore(std::move(db), path));
  store->checkpointer_ = std::move(checkpointer);
  {
    absl::MutexLock lock(&store->mu_);
    absl::Status status = ss::Migrate(store->db_.get());
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("state store ", path,
                                                      ": ", status.message()));
    }
  }
  return store;
}

absl::StatusOr<Database*> SqliteStateStore::OpenReader(
    std::unique_ptr<Database>* slot) {
  if (!IsPlainFile(path_)) return nullptr;
  if (*slot == nullptr) {
    sqlite::OpenOptions options;
    options.read_only = true;
    options.create = false;
    ASSIGN_OR_RETURN(*slot, Database::Open(path_, options));
    RETURN_IF_ERROR(sqlite::RegisterRowHashFunction(slot->get()));
  }
  return slot->get();
}

absl::StatusOr<Database*> SqliteStateStore::ReaderOrMain(
    std::unique_ptr<Database>* slot, std::optional<absl::MutexLock>* lock) {
  ASSIGN_OR_RETURN(Database * reader, OpenReader(slot));
  if (reader != nullptr) return reader;
  lock->emplace(&mu_);
  return db_.get();
}

// ---- jobs and tasks ---------------------------------------------------------

absl::StatusOr<StoreInfo> SqliteStateStore::Info() {
  return Read([](const StateDb& db) { return ss::Info(db); });
}

absl::StatusOr<std::vector<std::string>> SqliteStateStore::ListJobIds(
    const std::vector<JobState>& states) {
  if (states.empty()) return std::vector<std::string>();
  absl::MutexLock lock(&mu_);
  return ss::ListJobIds(Db(), states);
}

absl::Status SqliteStateStore::ReserveJobNumbers(int64_t n) {
  return Write([&](const StateDb& db) { return ss::ReserveJobNumbers(db, n); });
}

absl::StatusOr<CreateJobResult> SqliteStateStore::CreateJob(const Job& job,
                                                            absl::Time now) {
  return Write([&](const StateDb& db) -> absl::StatusOr<CreateJobResult> {
    ASSIGN_OR_RETURN(CreateJobResult result, ss::CreateJob(db, job, now));
    if (result.created) cache_.ForgetTally(result.job.id);
    return result;
  });
}

absl::StatusOr<std::optional<Job>> SqliteStateStore::FindJobByKey(
    const std::string& idempotency_key) {
  if (idempotency_key.empty()) return std::optional<Job>();
  return Read(
      [&](const StateDb& db) { return ss::FindJobByKey(db, idempotency_key); });
}

absl::StatusOr<Job> SqliteStateStore::GetJob(const std::string& id) {
  return ReadJob(id, /*with_partitions=*/true);
}

absl::StatusOr<Job> SqliteStateStore::GetJobProgress(const std::string& id) {
  return ReadJob(id, /*with_partitions=*/false);
}

absl::StatusOr<Job> SqliteStateStore::ReadJob(const std::string& id,
                                              bool with_partitions) {
  return Read([&](const StateDb& db) {
    return ss::LoadJob(db, id, with_partitions, &cache_);
  });
}

absl::StatusOr<Job> SqliteStateStore::GetJobForReader(const std::string& id,
                                                      JobView view) {
  absl::MutexLock lock(&mu_);
  const StateDb db = Db();
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db.db, Transaction::Mode::kDeferred));
  const bool basic = view == JobView::kBasic;
  if (basic) {
    RETURN_IF_ERROR(cache_.CheckDataVersion(db.db));
    if (const Job* kept = cache_.ReaderAnswer(id, db.db->TotalChanges())) {
      Job answer = *kept;
      RETURN_IF_ERROR(txn.Commit());
      return answer;
    }
  }
  ASSIGN_OR_RETURN(Job job, ss::LoadJob(db, id, !basic, &cache_));
  ASSIGN_OR_RETURN(job.checks, ss::LoadCheckResults(db, id));
  ASSIGN_OR_RETURN(job.consumers, ss::LoadConsumerConfirmations(db, id));
  ASSIGN_OR_RETURN(std::optional<std::vector<DiffSummary>> diff,
                   cache_.DiffSummaries(db, id));
  if (diff.has_value()) job.diff = *std::move(diff);
  RETURN_IF_ERROR(txn.Commit());
  if (basic) cache_.KeepReaderAnswer(id, job);
  return job;
}

absl::StatusOr<std::vector<Job>> SqliteStateStore::ListJobs(
    const JobFilter& filter) {
  return Read(
      [&](const StateDb& db) { return ss::ListJobs(db, filter, &cache_); });
}

absl::StatusOr<std::vector<PartitionTask>> SqliteStateStore::ListTasks(
    const std::string& job_id) {
  return Read([&](const StateDb& db) { return ss::ListTasks(db, job_id); });
}

absl::StatusOr<std::vector<PartitionTask>> SqliteStateStore::ListTaskPage(
    const TaskQuery& query) {
  return Read([&](const StateDb& db) { return ss::ListTaskPage(db, query); });
}

absl::Status SqliteStateStore::TransitionJob(
    const std::string& job_id, std::optional<JobState> expected_from,
    JobState to, const std::string& message, absl::Time now) {
  return Write([&](const StateDb& db) {
    return ss::TransitionJob(db, job_id, expected_from, to, message, now);
  });
}

absl::StatusOr<int64_t> SqliteStateStore::RetryJob(const std::string& job_id,
                                                   JobState expected_from,
                                                   JobState to,
                                                   const std::string& message,
                                                   absl::Time now) {
  return Write([&](const StateDb& db) {
    cache_.ForgetTally(job_id);
    return ss::RetryJob(db, job_id, expected_from, to, message, now);
  });
}

absl::Status SqliteStateStore::SetJobMessage(const std::string& job_id,
                                             JobState expected_state,
                                             const std::string& message,
                                             absl::Time now) {
  return Write([&](const StateDb& db) {
    return ss::SetJobMessage(db, job_id, expected_state, message, now);
  });
}

absl::Status SqliteStateStore::UpdateTask(const PartitionTask& task) {
  return CommitTasks(absl::MakeConstSpan(&task, 1));
}

absl::Status SqliteStateStore::UpdateTasks(
    const std::vector<PartitionTask>& tasks) {
  if (tasks.empty()) return absl::OkStatus();
  return CommitTasks(tasks);
}

absl::Status SqliteStateStore::CommitTasks(
    absl::Span<const PartitionTask> tasks) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db_.get()));
  // The jobs' kept sums follow the write, and are kept again only once it
  // commits.
  std::map<std::string, std::optional<TaskTally>> sums =
      cache_.TakeTallies(tasks);
  RETURN_IF_ERROR(ss::WriteTasks(Db(), tasks, &sums));
  RETURN_IF_ERROR(txn.Commit());
  cache_.KeepTallies(std::move(sums));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SqliteStateStore::UpdateTasksInState(
    const std::string& job_id, const std::vector<TaskState>& from, TaskState to,
    absl::Time now) {
  if (from.empty()) return 0;
  return Write([&](const StateDb& db) {
    cache_.ForgetTally(job_id);
    return ss::UpdateTasksInState(db, job_id, from, to, now);
  });
}

// ---- lineage ------------------------------------------------------------

absl::Status SqliteStateStore::RecordPublication(const std::string& job_id,
                                                 PublicationLineage& lineage,
                                                 JobState to, absl::Time now) {
  return Write([&](const StateDb& db) {
    cache_.ForgetTally(job_id);
    return ss::RecordPublication(db, job_id, lineage, to, now);
  });
}

absl::Status SqliteStateStore::RecordRollback(
    const std::string& job_id, const RollbackInfo& info,
    const std::vector<LineageRecord>& lineage, const std::string& message,
    const std::string& also_message, absl::Time now) {
  return Write([&](const StateDb& db) {
    return ss::RecordRollback(db, job_id, info, lineage, message, also_message,
                              now);
  });
}

absl::StatusOr<std::vector<LineageRecord>> SqliteStateStore::GetLineage(
    const std::string& dataset, const std::string& partition) {
  // Read per partition while a job runs: on the point-read connection when
  // there is one, so that it neither waits for writers nor makes them wait.
  absl::MutexLock reader_lock(&point_reader_mu_);
  std::optional<absl::MutexLock> lock;
  ASSIGN_OR_RETURN(Database * db, ReaderOrMain(&point_reader_, &lock));
  return ss::GetLineage(StateDb{db, path_}, dataset, partition);
}

absl::StatusOr<std::vector<std::optional<LineageRecord>>>
SqliteStateStore::NewestLineages(
    const std::vector<std::pair<std::string, std::string>>& keys) {
  // As GetLineage, for a batch of partitions in one read transaction.
  absl::MutexLock reader_lock(&point_reader_mu_);
  std::optional<absl::MutexLock> lock;
  ASSIGN_OR_RETURN(Database * db, ReaderOrMain(&point_reader_, &lock));
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db, Transaction::Mode::kDeferred));
  ASSIGN_OR_RETURN(std::vector<std::optional<LineageRecord>> out,
                   ss::NewestLineages(StateDb{db, path_}, keys));
  RETURN_IF_ERROR(txn.Commit());
  return out;
}

absl::StatusOr<std::optional<LineageRecord>> SqliteStateStore::NewestLineageOf(
    const std::string& dataset) {
  absl::MutexLock lock(&mu_);
  return ss::NewestLineageOf(Db(), dataset);
}

absl::StatusOr<std::vector<LineageRecord>>
SqliteStateStore::GetLineageOverlapping(const std::string& job_id) {
  return Read(
      [&](const StateDb& db) { return ss::GetLineageOverlapping(db, job_id); });
}

absl::StatusOr<std::map<std::string, absl::Time>>
SqliteStateStore::PublicationTimes(const std::vector<std::string>& job_ids) {
  return Read(
      [&](const StateDb& db) { return ss::PublicationTimes(db, job_ids); });
}

absl::Status SqliteStateStore::ReplaceJobDiff(const JobDiffHeader& header,
                                              DiffPages& pages) {
  return Write([&](const StateDb& db) {
    cache_.ForgetDiffSummaries(header.job_id);
    return ss::ReplaceJobDiff(db, header, pages);
  });
}

absl::StatusOr<std::optional<JobDiff>> SqliteStateStore::GetJobDiff(
    const std::string& job_id, const std::string& dataset, bool with_samples) {
  return Read([&](const StateDb& db) {
    return ss::LoadJobDiff(db, job_id, dataset, with_samples);
  });
}

absl::StatusOr<std::optional<std::vector<DiffSummary>>>
SqliteStateStore::GetJobDiffSummary(const std::string& job_id) {
  return Read(
      [&](const StateDb& db) { return cache_.DiffSummaries(db, job_id); });
}

absl::StatusOr<std::map<std::string, PartitionDiff>>
SqliteStateStore::PartitionDiffs(const std::string& dataset,
                                 const std::string& partition) {
  absl::MutexLock lock(&mu_);
  return ss::PartitionDiffs(Db(), dataset, partition);
}

// ---- queries ----------------------------------------------------------------

absl::StatusOr<std::map<std::string, int64_t>>
SqliteStateStore::LastRunInputRows(const std::string& dataset,
                                   const std::vector<std::string>& partitions) {
  if (partitions.empty()) return std::map<std::string, int64_t>();
  return Read([&](const StateDb& db) {
    return ss::LastRunInputRows(db, dataset, partitions);
  });
}

absl::StatusOr<std::map<std::string, VerifiedVersion>>
SqliteStateStore::VerifiedVersions(const std::string& dataset,
                                   const std::vector<std::string>& partitions) {
  // A long read (every version of a dataset): on the read connection when
  // there is one, so that checkpoints do not wait for it.
  absl::MutexLock reader_lock(&reader_mu_);
  std::optional<absl::MutexLock> lock;
  ASSIGN_OR_RETURN(Database * db, ReaderOrMain(&reader_, &lock));
  ASSIGN_OR_RETURN(Transaction txn,
                   Transaction::Begin(db, Transaction::Mode::kDeferred));
  absl::StatusOr<std::map<std::string, VerifiedVersion>> out =
      ss::VerifiedVersions(StateDb{db, path_}, dataset, partitions);
  if (!out.ok()) return out;
  RETURN_IF_ERROR(txn.Commit());
  return out;
}

absl::StatusOr<StoreStats> SqliteStateStore::Stats() {
  return Read([](const StateDb& db) { return ss::Stats(db); });
}

absl::StatusOr<std::vector<ConsumerStanding>>
SqliteStateStore::ListConsumerStandings() {
  absl::MutexLock lock(&mu_);
  return ss::ListConsumerStandings(Db());
}

// ---- governance ---------------------------------------------------------

absl::Status SqliteStateStore::ApproveJob(const std::string& job_id,
                                          JobState expected_from, JobState to,
                                          const Approval& approval,
                                          const std::string& message,
                                          absl::Time now) {
  return Write([&](const StateDb& db) {
    return ss::ApproveJob(db, job_id, expected_from, to, approval, message,
                          now);
  });
}

absl::StatusOr<std::vector<AuditEvent>> SqliteStateStore::ListAuditEvents(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  return ss::ListAuditEvents(Db(), job_id);
}

absl::Status SqliteStateStore::SetReplayPolicyPause(
    const ReplayPolicyPause& pause, const std::string& message) {
  return Write([&](const StateDb& db) {
    return ss::SetReplayPolicyPause(db, pause, message);
  });
}

absl::StatusOr<std::vector<ReplayPolicyPause>>
SqliteStateStore::ListReplayPolicyPauses() {
  absl::MutexLock lock(&mu_);
  return ss::ListReplayPolicyPauses(Db());
}

absl::StatusOr<std::vector<AuditEvent>> SqliteStateStore::ListAuditLog(
    const AuditQuery& query) {
  absl::MutexLock lock(&mu_);
  return ss::ListAuditLog(Db(), query);
}

absl::Status SqliteStateStore::ReplaceCheckResults(
    const std::string& job_id, const std::vector<CheckResult>& results) {
  return Write([&](const StateDb& db) {
    return ss::ReplaceCheckResults(db, job_id, results);
  });
}

absl::StatusOr<std::vector<CheckResult>> SqliteStateStore::ListCheckResults(
    const std::string& job_id) {
  return Read(
      [&](const StateDb& db) { return ss::ListCheckResults(db, job_id); });
}

absl::Status SqliteStateStore::ReplaceConsumerConfirmations(
    const std::string& job_id, const std::vector<ConsumerFinding>& results) {
  return Write([&](const StateDb& db) {
    return ss::ReplaceConsumerConfirmations(db, job_id, results);
  });
}

absl::StatusOr<std::vector<ConsumerFinding>>
SqliteStateStore::ListConsumerConfirmations(const std::string& job_id) {
  return Read([&](const StateDb& db) {
    return ss::ListConsumerConfirmations(db, job_id);
  });
}

}  // namespace backfill
