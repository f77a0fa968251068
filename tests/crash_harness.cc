// backfill_crash_harness: kills backfilld with SIGKILL at each of its crash
// points (BACKFILL_TEST_CRASH_AT, core/run/crash_point.h) in the middle of a
// correction backfill, restarts it, and proves with plain SQL over the raw
// tables, a snapshot and the state store that nothing was lost and nothing
// was published twice.
//
// A trial, on a fresh temporary data directory:
//   1. writes the warehouse (WriteWarehouse) and a pipeline of daily_revenue
//      with two dependents, daily_total (identity) and region_totals (all,
//      unpartitioned), so that one publish spans three datasets;
//   2. loads every day with a normal daemon, which must exit 0 on SIGTERM;
//   3. corrects the raw orders of a random set of days with plain UPDATEs and
//      snapshots the warehouse;
//   4. starts the daemon with the crash point armed for a random visit N,
//      submits the backfill of those days (with an idempotency key) and
//      waits for the daemon to die, or for the job to end when the point is
//      not reached. For `recovery`, the first kill is at another random
//      point, and the daemon is then restarted with `recovery` armed, so
//      that it dies again while resuming the job;
//   5. restarts it without the variable (resubmitting with the same key if
//      the submit was never acknowledged), waits until the job is terminal
//      and stops it with SIGTERM, which must exit 0.
// After each kill and at the end of the trial it checks, never by asking the
// service: PRAGMA integrity_check of both databases; that every partition
// of every dataset is the complete old version (the snapshot) or the
// complete new version (recomputed from the raw tables), and that the job's
// partitions are all old or all new; at the end, that the job SUCCEEDED,
// its partitions are new and all others equal the snapshot, that lineage and
// publication markers hold no duplicate, and that the newest lineage record
// of every partition has the published row count and fingerprint.
//
// Prints a table per crash point and "N passed, N failed"; exits 1 on any
// failure, keeping the failed trials' directories.

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
#include "tests/crash_harness_model.h"
#include "tests/crash_harness_processes.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace crash {
namespace {

namespace fs = std::filesystem;
using e2e::Clock;
using e2e::Daemon;
using e2e::ReadFile;
using e2e::Rows;
using e2e::RunResult;
using e2e::Sqlite;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kDays = 28;  // 2025-01-01 .. 2025-01-28
constexpr int kOrdersPerDay = 40;
constexpr int kMinCorrectedDays = 2;
constexpr int kMaxCorrectedDays = 6;
constexpr char kRecovery[] = "recovery";

// --- A trial -----------------------------------------------------------------

struct TrialResult {
  bool reached = false;
  bool acknowledged = true;
  Findings findings;
  std::vector<std::string> notes;  // what happened, for a failure report
  std::vector<std::string> logs;   // the daemons' logs
};

// Whether a point comes before the publish transaction commits: a kill
// there leaves the job's partitions all old, one after it all new.
bool BeforeCommit(const std::string& point) {
  return point != "publish.before_record" && point != "confirm";
}

class Trial {
 public:
  Trial(const Options& options, const std::string& dir,
        const std::string& point, int number, std::mt19937_64 rng)
      : options_(options),
        dir_(dir),
        point_(point),
        number_(number),
        rng_(std::move(rng)) {}

  TrialResult Run();

 private:
  void RunSteps();
  int Uniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }
  std::string warehouse() const { return dir_ + "/data/warehouse.db"; }
  std::string state_db() const { return dir_ + "/data/state.db"; }

  // How many times the correction job reaches `point`: once per partition
  // for the staging points, once for the others.
  int Visits(const std::string& point) const {
    if (absl::StartsWith(point, "stage.")) {
      return static_cast<int>(job_partitions_.size());
    }
    return 1;
  }
  std::string ArmFor(const std::string& point) {
    const int n = Uniform(1, Visits(point));
    return n == 1 ? point : absl::StrCat(point, ":", n);
  }

  bool Setup();
  bool InitialLoad();
  bool Correct();
  void Submit(TrialDaemon& d);
  void ExpectExit(int code, int expected, const std::string& what,
                  const std::string& log);
  void CheckIntegrity(const std::string& when);
  void CheckAtCrash(const std::string& when, bool expect_new);
  void CheckVersions(const std::string& when, std::optional<bool> expect_new);
  void CheckFinal();
  void CheckLineage();
  void TakeHelperFailures(const std::string& where);
  void Note(const std::string& line) { notes_.push_back(line); }

  const Options& options_;
  const std::string dir_;
  const std::string point_;
  const int number_;
  std::mt19937_64 rng_;

  TrialResult result_;
  std::vector<std::string> notes_;
  std::vector<std::string> days_;  // corrected days
  std::set<Key> job_partitions_;
  std::string key_;
  std::string initial_job_;
  std::string job_;  // the correction job, once known
  Contents old_;     // the snapshot
  Contents new_;     // recomputed from the corrected raw tables
  std::vector<std::string> logs_;
};

void Trial::TakeHelperFailures(const std::string& where) {
  for (const std::string& m : collector->Take()) {
    result_.findings.Add(kOther, absl::StrCat(where, ": ", m));
  }
}

bool Trial::Setup() {
  fs::create_directories(dir_ + "/data");
  fs::create_directories(dir_ + "/pipelines");
  e2e::WriteWarehouse(warehouse(), kDays, kOrdersPerDay);
  e2e::WriteFile(
      dir_ + "/pipelines/crash.yaml",
      e2e::PipelineYaml(/*slow=*/false, fixtures::RevenueDependentsYaml()));
  TakeHelperFailures("writing the warehouse");
  return result_.findings.ok();
}

void Trial::ExpectExit(int code, int expected, const std::string& what,
                       const std::string& log) {
  if (code != expected) {
    result_.findings.Add(kExit,
                         absl::StrCat(what, ": backfilld exited with ", code,
                                      " (expected ", expected, "); log ", log));
  }
}

bool Trial::InitialLoad() {
  TrialDaemon d(dir_, "1-load", options_.workers, "");
  logs_.push_back(d.log());
  if (std::optional<int> code = d.Start()) {
    result_.findings.Add(kExit, absl::StrCat("the loading daemon did not start "
                                             "(exit ",
                                             *code, "); log ", d.log()));
    return false;
  }
  const std::string to =
      absl::FormatCivilTime(absl::CivilDay(2025, 1, 1) + kDays);
  RunResult r =
      d->CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to", to,
                  "--reason", "crash harness load", "--wait"},
                 seconds(180));
  initial_job_ = e2e::JsonString(r.out, "id");
  if (r.exit_code != 0 ||
      e2e::JsonString(r.out, "state") != "BACKFILL_STATE_SUCCEEDED") {
    std::ostringstream os;
    os << r;
    result_.findings.Add(kOther,
                         absl::StrCat("the initial load failed:\n", os.str()));
    return false;
  }
  ExpectExit(d.Stop(), 0, "SIGTERM after the initial load", d.log());
  // The load itself must publish exactly what the raw tables give.
  std::string error;
  std::optional<Contents> published = ReadPublished(warehouse(), &error);
  std::optional<Contents> expected = Recompute(warehouse(), &error);
  if (!published || !expected) {
    result_.findings.Add(kOther, absl::StrCat("reading the load: ", error));
    return false;
  }
  if (*published != *expected) {
    for (const auto& [key, rows] : *expected) {
      if (RowsOf(*published, key) != rows) {
        result_.findings.Add(
            kMixed, absl::StrCat("after the initial load, ", KeyName(key),
                                 " is ", Describe(RowsOf(*published, key)),
                                 ", the raw tables give ", Describe(rows)));
      }
    }
    return false;
  }
  return result_.findings.ok();
}

bool Trial::Correct() {
  std::vector<int> all(kDays);
  for (int i = 0; i < kDays; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), rng_);
  all.resize(Uniform(kMinCorrectedDays, kMaxCorrectedDays));
  std::sort(all.begin(), all.end());
  for (int d : all) {
    days_.push_back(absl::FormatCivilTime(absl::CivilDay(2025, 1, 1) + d));
  }
  for (const std::string& day : days_) {
    job_partitions_.insert({"daily_revenue", day});
    job_partitions_.insert({"daily_total", day});
  }
  job_partitions_.insert({"region_totals", ""});

  // Every corrected order earns 1 to 5 more and some lose their refund, so
  // that every row of a corrected partition changes.
  const int mod = Uniform(3, 7);
  const int rest = Uniform(0, mod - 1);
  std::vector<std::string> quoted;
  for (const std::string& day : days_) quoted.push_back("'" + day + "'");
  Sqlite db(warehouse());
  const std::string in = absl::StrJoin(quoted, ", ");
  if (!db.Exec(absl::StrCat(
          "BEGIN; UPDATE raw_orders SET amount = amount + 1 + (order_id % 5)",
          " WHERE order_date IN (", in, ");",
          " UPDATE raw_orders SET refund = 0 WHERE order_date IN (", in,
          ") AND order_id % ", mod, " = ", rest, "; COMMIT;")) ||
      !db.Exec(absl::StrCat("VACUUM INTO '", dir_, "/snapshot.db'"))) {
    result_.findings.Add(kOther, absl::StrCat("correcting: ", db.error()));
    return false;
  }
  std::string error;
  std::optional<Contents> old = ReadPublished(dir_ + "/snapshot.db", &error);
  std::optional<Contents> fresh = Recompute(warehouse(), &error);
  if (!old || !fresh) {
    result_.findings.Add(kOther, absl::StrCat("reading the snapshot: ", error));
    return false;
  }
  old_ = *std::move(old);
  new_ = *std::move(fresh);
  for (const Key& key : job_partitions_) {
    if (RowsOf(old_, key) == RowsOf(new_, key)) {
      result_.findings.Add(kOther, absl::StrCat("the correction left ",
                                                KeyName(key), " unchanged"));
    }
  }
  key_ = absl::StrCat("crash-", point_, "-", number_, "-", rng_() % 1000000);
  return result_.findings.ok();
}

void Trial::Submit(TrialDaemon& d) {
  RunResult r = d->CtlJson(
      {"submit", "daily_revenue", "--partitions", absl::StrJoin(days_, ","),
       "--reason", "crash harness correction", "--idempotency-key", key_},
      seconds(120));
  const std::string id = e2e::JsonString(r.out, "id");
  if (r.exit_code == 0 && !id.empty()) {
    job_ = id;
    Note(absl::StrCat("submit acknowledged: ", id));
  } else {
    Note(absl::StrCat("submit not acknowledged (exit ", r.exit_code,
                      "): ", Tail(r.err, 1)));
  }
}

void Trial::CheckIntegrity(const std::string& when) {
  for (const std::string& path : {state_db(), warehouse()}) {
    Sqlite db(path, /*read_only=*/true);
    std::optional<Rows> rows = db.Query("PRAGMA integrity_check");
    if (!rows || rows->size() != 1 || (*rows)[0].size() != 1 ||
        (*rows)[0][0] != "ok") {
      std::string text = rows ? Describe(*rows) : db.error();
      result_.findings.Add(
          kIntegrity, absl::StrCat(when, ": integrity_check of ", path, ": ",
                                   text.empty() ? db.error() : text));
    }
  }
}

// With the daemon dead: both databases are sound and the publish was
// atomic (see CheckVersions).
void Trial::CheckAtCrash(const std::string& when, bool expect_new) {
  CheckIntegrity(when);
  CheckVersions(when, expect_new);
}

// Every partition is the old or the new version, those outside the job
// old, and the job's all old or all new: the side `expect_new` says, if it
// says one.
void Trial::CheckVersions(const std::string& when,
                          std::optional<bool> expect_new) {
  std::string error;
  std::optional<Contents> published = ReadPublished(warehouse(), &error);
  if (!published) {
    result_.findings.Add(kOther, absl::StrCat(when, ": ", error));
    return;
  }
  std::set<Key> keys;
  for (const Contents* c : {&*published, &old_, &new_}) {
    for (const auto& [key, rows] : *c) keys.insert(key);
  }
  int olds = 0, news = 0;
  for (const Key& key : keys) {
    const Rows& p = RowsOf(*published, key);
    const bool is_old = p == RowsOf(old_, key);
    const bool is_new = p == RowsOf(new_, key);
    const bool in_job = job_partitions_.count(key) > 0;
    if (!is_old && !is_new) {
      result_.findings.Add(
          kMixed,
          absl::StrCat(when, ": ", KeyName(key),
                       " is neither the old nor the new version: ", Describe(p),
                       "; old ", Describe(RowsOf(old_, key)), "; new ",
                       Describe(RowsOf(new_, key))));
    } else if (!in_job && !is_old) {
      result_.findings.Add(
          kMixed, absl::StrCat(when, ": ", KeyName(key),
                               " is outside the job but changed: ", Describe(p),
                               "; old ", Describe(RowsOf(old_, key))));
    } else if (in_job) {
      olds += is_old && !is_new;
      news += is_new && !is_old;
    }
  }
  if (olds > 0 && news > 0) {
    result_.findings.Add(
        kMixed, absl::StrCat(when, ": the job is half published: ", news,
                             " of its partitions are new, ", olds, " old"));
  } else if (expect_new == true && olds > 0) {
    result_.findings.Add(
        kMixed, absl::StrCat(when, ": the publish had committed, yet ", olds,
                             " partitions of the job are old"));
  } else if (expect_new == false && news > 0) {
    result_.findings.Add(kMixed,
                         absl::StrCat(when,
                                      ": the publish had not "
                                      "committed, yet ",
                                      news, " partitions of the job are new"));
  }
}

void Trial::CheckFinal() {
  CheckIntegrity("at the end");
  Sqlite state(state_db(), /*read_only=*/true);
  std::optional<Rows> jobs = state.Query(
      "SELECT id, state, COALESCE(idempotency_key, '') FROM jobs ORDER BY seq");
  if (!jobs) {
    result_.findings.Add(kOther, absl::StrCat("reading jobs: ", state.error()));
    return;
  }
  bool succeeded = false;
  std::vector<std::string> with_key;
  for (const std::vector<std::string>& j : *jobs) {
    if (j[0] == initial_job_) {
      if (j[1] != "SUCCEEDED") {
        result_.findings.Add(
            kLost, absl::StrCat("the initial load ", j[0], " is ", j[1]));
      }
    } else if (j[2] == key_) {
      with_key.push_back(j[0]);
      if (j[1] != "SUCCEEDED") {
        result_.findings.Add(
            kLost, absl::StrCat("the correction job ", j[0], " ended ", j[1]));
      } else {
        succeeded = true;
      }
    } else {
      result_.findings.Add(kDuplicated,
                           absl::StrCat("an unexpected job ", j[0], " (", j[1],
                                        ", key \"", j[2], "\")"));
    }
  }
  if (with_key.size() != 1) {
    result_.findings.Add(
        with_key.empty() ? kLost : kDuplicated,
        absl::StrCat(with_key.size(), " jobs for the correction's key ", key_,
                     ": ", absl::StrJoin(with_key, ", ")));
  } else if (!job_.empty() && with_key[0] != job_) {
    result_.findings.Add(
        kLost, absl::StrCat("the acknowledged job ", job_,
                            " is not the job of its key (", with_key[0], ")"));
  }
  if (job_.empty() && with_key.size() == 1) job_ = with_key[0];

  if (!succeeded) {
    // Lost already; what is published must still be whole.
    CheckVersions("at the end", std::nullopt);
    CheckLineage();
    return;
  }
  std::string error;
  std::optional<Contents> published = ReadPublished(warehouse(), &error);
  if (!published) {
    result_.findings.Add(kOther, absl::StrCat("at the end: ", error));
    return;
  }
  std::set<Key> keys;
  for (const Contents* c : {&*published, &old_, &new_}) {
    for (const auto& [key, rows] : *c) keys.insert(key);
  }
  for (const Key& key : keys) {
    const Rows& p = RowsOf(*published, key);
    const bool in_job = job_partitions_.count(key) > 0;
    const Rows& want = in_job ? RowsOf(new_, key) : RowsOf(old_, key);
    if (p != want) {
      result_.findings.Add(
          kMixed,
          absl::StrCat("at the end, ", KeyName(key), " is ", Describe(p),
                       "; expected the ", in_job ? "new" : "old", " version ",
                       Describe(want)));
    }
  }
  CheckLineage();
}

void Trial::CheckLineage() {
  Sqlite state(state_db(), /*read_only=*/true);
  Sqlite wh(warehouse(), /*read_only=*/true);
  std::optional<Rows> dups = state.Query(
      "SELECT job_id, dataset, \"partition\", COUNT(*) FROM "
      "lineage GROUP BY 1, 2, 3 HAVING COUNT(*) > 1");
  std::optional<Rows> markers = wh.Query(
      "SELECT store_id, job_id, COUNT(*) FROM _bf_publications GROUP BY 1, 2");
  std::optional<Rows> store_id =
      state.Query("SELECT value FROM meta WHERE key = 'store_id'");
  std::optional<Rows> lineage = state.Query(
      "SELECT dataset, \"partition\", job_id, row_count, output_fingerprint "
      "FROM lineage ORDER BY dataset, \"partition\", published_at, id");
  if (!dups || !lineage || !store_id || store_id->size() != 1) {
    result_.findings.Add(kOther,
                         absl::StrCat("reading lineage: ", state.error()));
    return;
  }
  if (!markers) {
    result_.findings.Add(kOther, absl::StrCat("reading markers: ", wh.error()));
    return;
  }
  for (const std::vector<std::string>& d : *dups) {
    result_.findings.Add(
        kDuplicated, absl::StrCat("job ", d[0], " has ", d[3],
                                  " lineage records for ", d[1], "/", d[2]));
  }
  std::map<std::string, int> marked;  // job -> markers of this store
  for (const std::vector<std::string>& m : *markers) {
    if (m[2] != "1") {
      result_.findings.Add(
          kDuplicated, absl::StrCat(m[2], " publication markers for (", m[0],
                                    ", ", m[1], ")"));
    }
    if (m[0] == (*store_id)[0][0]) marked[m[1]] += std::stoi(m[2]);
  }
  std::string error;
  std::optional<Contents> published = ReadPublished(warehouse(), &error);
  if (!published) {
    result_.findings.Add(kOther, error);
    return;
  }
  // Whether the correction is published: its partitions are then new (all
  // of them; CheckVersions reports a half publication).
  bool job_published = false;
  for (const Key& key : job_partitions_) {
    job_published =
        job_published || (RowsOf(*published, key) != RowsOf(old_, key) &&
                          RowsOf(*published, key) == RowsOf(new_, key));
  }
  const std::pair<std::string, int> expected_markers[] = {
      {initial_job_, 1}, {job_, job_published ? 1 : 0}};
  for (const auto& [job, want] : expected_markers) {
    if (!job.empty() && marked[job] != want) {
      result_.findings.Add(
          kLineage, absl::StrCat("job ", job, " has ", marked[job],
                                 " publication markers in the warehouse, "
                                 "expected ",
                                 want));
    }
  }

  // The newest record of every partition, and the job's own records.
  std::map<Key, std::vector<std::string>> newest;
  std::set<Key> of_job;
  for (const std::vector<std::string>& l : *lineage) {
    newest[{l[0], l[1]}] = l;
    if (l[2] == job_) of_job.insert({l[0], l[1]});
  }
  const std::set<Key> want_of_job =
      job_published ? job_partitions_ : std::set<Key>();
  if (!job_.empty() && of_job != want_of_job) {
    result_.findings.Add(
        kLineage, absl::StrCat("job ", job_, " has lineage for ", of_job.size(),
                               " partitions, expected ", want_of_job.size()));
  }
  std::set<Key> keys;
  for (const auto& [key, rows] : *published) keys.insert(key);
  for (const auto& [key, record] : newest) keys.insert(key);
  for (const Key& key : keys) {
    auto it = newest.find(key);
    if (it == newest.end()) {
      result_.findings.Add(
          kLineage,
          absl::StrCat(KeyName(key), " is published without lineage"));
      continue;
    }
    const std::vector<std::string>& rec = it->second;
    const std::string want_job =
        job_published && job_partitions_.count(key) > 0 ? job_ : initial_job_;
    if (rec[2] != want_job) {
      result_.findings.Add(
          kLineage, absl::StrCat("the newest lineage of ", KeyName(key),
                                 " is from ", rec[2], ", expected ", want_job));
    }
    const DatasetModel* ds = nullptr;
    for (const DatasetModel& d : Datasets()) {
      if (d.name == key.first) ds = &d;
    }
    if (ds == nullptr) {
      result_.findings.Add(kLineage, absl::StrCat("lineage of an unknown "
                                                  "dataset: ",
                                                  KeyName(key)));
      continue;
    }
    std::string sql =
        absl::StrCat("SELECT ", ColumnList(*ds), " FROM ", Quoted(ds->name));
    std::vector<std::string> params;
    if (!ds->partition_column.empty()) {
      absl::StrAppend(&sql, " WHERE ", Quoted(ds->partition_column), " = ?1");
      params.push_back(key.second);
    }
    std::optional<Fingerprint> fp = FingerprintOf(wh, sql, params, &error);
    if (!fp) {
      result_.findings.Add(kOther, error);
      continue;
    }
    if (rec[3] != std::to_string(fp->rows()) || rec[4] != fp->ToString()) {
      result_.findings.Add(
          kLineage,
          absl::StrCat("the newest lineage of ", KeyName(key), " (", rec[2],
                       ") says ", rec[3], " rows, fingerprint ", rec[4],
                       "; published: ", fp->rows(), " rows, fingerprint ",
                       fp->ToString()));
    }
  }
}

TrialResult Trial::Run() {
  RunSteps();
  result_.notes = notes_;
  result_.logs = logs_;
  return result_;
}

void Trial::RunSteps() {
  if (!Setup() || !InitialLoad() || !Correct()) return;

  // The first daemon, armed; for `recovery` at another point first.
  std::string first_point = point_;
  if (point_ == kRecovery) {
    std::vector<std::string> others;
    for (const char* p : kCrashPoints) {
      if (p != std::string(kRecovery)) others.push_back(p);
    }
    first_point = others[Uniform(0, static_cast<int>(others.size()) - 1)];
  }
  const std::string first_arm = ArmFor(first_point);
  Note(absl::StrCat("days ", absl::StrJoin(days_, ","), "; ",
                    job_partitions_.size(), " partitions; armed ", first_arm));
  bool died = false;
  {
    TrialDaemon d(dir_, "2-armed", options_.workers, first_arm);
    logs_.push_back(d.log());
    if (std::optional<int> code = d.Start()) {
      result_.findings.Add(
          kExit, absl::StrCat("the armed daemon did not start (exit ", *code,
                              "); log ", d.log()));
      return;
    }
    Submit(d);
    // Unacknowledged: the daemon is dying, or it refused the submit.
    Outcome o = WaitDeathOrEnd(d, job_, seconds(job_.empty() ? 30 : 180));
    if (o.timed_out) {
      result_.findings.Add(
          job_.empty() ? kOther : kLost,
          absl::StrCat("with ", first_arm, " armed, the daemon neither died ",
                       job_.empty() ? "after the submit failed"
                                    : "nor ended the job in 180 s"));
      return;
    }
    if (o.died) {
      died = true;
      ExpectExit(o.exit_code, 128 + SIGKILL, "at the crash point", d.log());
      Note(absl::StrCat("killed at ", first_arm));
      CheckAtCrash(absl::StrCat("after the kill at ", first_arm),
                   !BeforeCommit(first_point));
    } else {
      Note(absl::StrCat(first_arm, " not reached; the job ended ", o.state));
      ExpectExit(d.Stop(), 0, "SIGTERM of the armed daemon", d.log());
    }
  }
  result_.reached = point_ != kRecovery && died;
  if (!died && job_.empty()) {
    result_.findings.Add(kOther, "the submit was refused by a live daemon");
    return;
  }
  result_.acknowledged = !job_.empty();

  int generation = 3;
  std::optional<TrialDaemon> serving;
  if (point_ == kRecovery && died) {
    // Dies again while resuming the job; then a clean restart.
    serving.emplace(dir_, absl::StrCat(generation++, "-recovery"),
                    options_.workers, kRecovery);
    logs_.push_back(serving->log());
    if (std::optional<int> code = serving->Start()) {
      ExpectExit(*code, 128 + SIGKILL, "at recovery", serving->log());
      serving.reset();
      result_.reached = *code == 128 + SIGKILL;
      Note("killed at recovery");
      CheckAtCrash("after the kill at recovery", !BeforeCommit(first_point));
    } else {
      Note("recovery not reached: no job to resume");
    }
  } else if (point_ == kRecovery) {
    Note("recovery not reached: the first point was not reached");
  }
  if (died && !serving) {
    serving.emplace(dir_, absl::StrCat(generation++, "-clean"),
                    options_.workers, "");
    logs_.push_back(serving->log());
    if (std::optional<int> code = serving->Start()) {
      result_.findings.Add(
          kExit, absl::StrCat("the restarted daemon did not start (exit ",
                              *code, "); log ", serving->log()));
      return;
    }
  }
  if (serving) {
    if (job_.empty()) {
      Submit(*serving);  // again, with the same idempotency key
      if (job_.empty()) {
        result_.findings.Add(kOther, "the resubmit was not acknowledged");
      }
    }
    Outcome o = WaitDeathOrEnd(*serving, job_, seconds(180));
    if (o.timed_out) {
      result_.findings.Add(
          kLost,
          absl::StrCat("job ", job_, " not terminal 180 s after the restart"));
    } else if (o.died) {
      result_.findings.Add(
          kExit, absl::StrCat("the restarted daemon died with ", o.exit_code,
                              "; log ", serving->log()));
    } else {
      Note(absl::StrCat("after the restart the job ended ", o.state));
      ExpectExit(serving->Stop(), 0, "SIGTERM after the job", serving->log());
    }
    serving.reset();
  }
  for (const std::string& log : logs_) {
    const std::string text = ReadFile(log);
    if (absl::StrContains(text, "Sanitizer") ||
        absl::StrContains(text, "runtime error:")) {
      result_.findings.Add(kExit, absl::StrCat("a sanitizer report in ", log));
    }
  }
  CheckFinal();
}

// --- The run -----------------------------------------------------------------

struct PointTotals {
  int trials = 0;
  int reached = 0;
  int unacknowledged = 0;
  int failed = 0;
  int count[kCategories] = {};
};

void PrintFailure(const std::string& point, int number, const std::string& dir,
                  const TrialResult& r) {
  std::printf("---- FAILED: %s trial %d, kept in %s\n", point.c_str(), number,
              dir.c_str());
  for (const std::string& n : r.notes) std::printf("  . %s\n", n.c_str());
  for (const std::string& d : r.findings.details) {
    std::printf("  ! %s\n", d.c_str());
  }
  for (const std::string& log : r.logs) {
    std::printf("  -- last lines of %s:\n", log.c_str());
    std::istringstream lines(Tail(ReadFile(log), 15));
    std::string line;
    while (std::getline(lines, line)) std::printf("     %s\n", line.c_str());
  }
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  const Options options = ParseFlags(argc, argv);
  e2e::SetBinDir(options.bin_dir);
  for (const char* bin : {"backfilld", "backfillctl"}) {
    if (!fs::exists(e2e::Bin(bin))) {
      std::fprintf(stderr, "backfill_crash_harness: %s not found (--bin-dir)\n",
                   e2e::Bin(bin).c_str());
      return 2;
    }
  }
  ::testing::TestEventListeners& listeners =
      ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  collector = new FailureCollector();
  listeners.Append(collector);
  signal(SIGTERM, OnStopSignal);
  signal(SIGINT, OnStopSignal);
  signal(SIGHUP, OnStopSignal);

  const char* tmp = std::getenv("TMPDIR");
  std::string root =
      absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/backfill-crash-XXXXXX");
  if (mkdtemp(root.data()) == nullptr) {
    std::perror("mkdtemp");
    return 2;
  }
  std::printf(
      "backfill_crash_harness: %d trial(s) per point, points %s, seed %llu, "
      "--workers %d, in %s\n",
      options.trials, absl::StrJoin(options.points, ",").c_str(),
      static_cast<unsigned long long>(options.seed), options.workers,
      root.c_str());
  std::fflush(stdout);

  const auto started = Clock::now();
  std::map<std::string, PointTotals> totals;
  int passed = 0, failed = 0;
  bool kept = options.keep;
  for (const std::string& point : options.points) {
    for (int t = 1; t <= options.trials; ++t) {
      const std::string dir = absl::StrCat(root, "/", point, "-", t);
      std::seed_seq seq{static_cast<uint32_t>(options.seed),
                        static_cast<uint32_t>(options.seed >> 32),
                        static_cast<uint32_t>(PointIndex(point)),
                        static_cast<uint32_t>(t)};
      std::mt19937_64 rng(seq);
      const auto t0 = Clock::now();
      Trial trial(options, dir, point, t, std::move(rng));
      const TrialResult r = trial.Run();
      const double took =
          std::chrono::duration<double>(Clock::now() - t0).count();
      PointTotals& p = totals[point];
      ++p.trials;
      p.reached += r.reached;
      p.unacknowledged += !r.acknowledged;
      for (int c = 0; c < kCategories; ++c) p.count[c] += r.findings.count[c];
      const bool ok = r.findings.ok();
      std::printf("%-24s trial %3d  %s  %-11s %5.1fs  %s\n", point.c_str(), t,
                  ok ? "pass" : "FAIL", r.reached ? "reached" : "not reached",
                  took, r.notes.empty() ? "" : r.notes.front().c_str());
      std::fflush(stdout);
      if (ok) {
        ++passed;
        if (!options.keep) {
          std::error_code ec;
          fs::remove_all(dir, ec);
        }
      } else {
        ++failed;
        ++p.failed;
        kept = true;
        PrintFailure(point, t, dir, r);
      }
    }
  }

  std::printf("\n%-24s %6s %7s %7s %5s %6s %10s %9s %7s %11s %5s\n", "point",
              "trials", "reached", "unacked", "lost", "mixed", "duplicated",
              "integrity", "lineage", "daemon-exit", "other");
  PointTotals all;
  for (const std::string& point : options.points) {
    const PointTotals& p = totals[point];
    std::printf("%-24s %6d %7d %7d %5d %6d %10d %9d %7d %11d %5d\n",
                point.c_str(), p.trials, p.reached, p.unacknowledged,
                p.count[kLost], p.count[kMixed], p.count[kDuplicated],
                p.count[kIntegrity], p.count[kLineage], p.count[kExit],
                p.count[kOther]);
    all.trials += p.trials;
    all.reached += p.reached;
    all.unacknowledged += p.unacknowledged;
    for (int c = 0; c < kCategories; ++c) all.count[c] += p.count[c];
  }
  std::printf("%-24s %6d %7d %7d %5d %6d %10d %9d %7d %11d %5d\n", "total",
              all.trials, all.reached, all.unacknowledged, all.count[kLost],
              all.count[kMixed], all.count[kDuplicated], all.count[kIntegrity],
              all.count[kLineage], all.count[kExit], all.count[kOther]);
  std::printf("\n%.0f s; seed %llu\n",
              std::chrono::duration<double>(Clock::now() - started).count(),
              static_cast<unsigned long long>(options.seed));
  if (kept) {
    std::printf("kept %s\n", root.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace crash
}  // namespace backfill

int main(int argc, char** argv) { return backfill::crash::Main(argc, argv); }
