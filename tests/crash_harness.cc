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

const std::vector<DatasetModel>& Datasets() {
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

std::string Quoted(const std::string& name) {
  return absl::StrCat("\"", name, "\"");
}

std::string ColumnList(const DatasetModel& ds) {
  std::vector<std::string> cols;
  for (const std::string& c : ds.columns) cols.push_back(Quoted(c));
  return absl::StrJoin(cols, ", ");
}

// --- Typed reads -------------------------------------------------------------

// One value with its storage class: "I:42", "R:17.5" (%.17g), "T:north",
// "B:<hex>" or "N", so that 1 and 1.0 and '1' all differ.
std::string TypedValue(sqlite3_stmt* stmt, int c) {
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
std::optional<Rows> TypedQuery(Sqlite& db, const std::string& sql,
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
std::optional<Fingerprint> FingerprintOf(Sqlite& db, const std::string& sql,
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

std::string KeyName(const Key& key) {
  return key.second.empty() ? key.first
                            : absl::StrCat(key.first, "/", key.second);
}

// Adds `rows` of `ds` to `out` under their partitions.
void AddRows(const DatasetModel& ds, Rows rows, Contents* out) {
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
std::optional<Contents> ReadPublished(const std::string& path,
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
std::optional<Contents> Recompute(const std::string& warehouse,
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

const Rows& RowsOf(const Contents& c, const Key& key) {
  static const auto* empty = new Rows();
  auto it = c.find(key);
  return it == c.end() ? *empty : it->second;
}

std::string Describe(const Rows& rows) {
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

constexpr const char* kCategoryNames[kCategories] = {
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

// --- Processes ---------------------------------------------------------------

// Daemons alive now, killed if the harness itself is told to stop.
constexpr int kMaxTracked = 8;
volatile sig_atomic_t tracked[kMaxTracked] = {};

void Track(pid_t pid) {
  for (int i = 0; i < kMaxTracked; ++i) {
    if (tracked[i] == 0) {
      tracked[i] = pid;
      return;
    }
  }
}

void Untrack(pid_t pid) {
  for (int i = 0; i < kMaxTracked; ++i) {
    if (tracked[i] == pid) tracked[i] = 0;
  }
}

void OnStopSignal(int sig) {
  for (int i = 0; i < kMaxTracked; ++i) {
    if (tracked[i] > 0) kill(static_cast<pid_t>(tracked[i]), SIGKILL);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

// Whether `pid` (a child not yet reaped) has exited, without reaping it.
bool HasExited(pid_t pid) {
  if (pid <= 0) return true;
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return true;
  const char state = stat[paren + 2];
  return state == 'Z' || state == 'X';
}

// A daemon of the trial: its log under the trial directory, its pid
// tracked while it runs.
class TrialDaemon {
 public:
  TrialDaemon(const std::string& dir, const std::string& name, int workers,
              const std::string& crash_at)
      : log_(absl::StrCat(dir, "/backfilld-", name, ".log")),
        daemon_(dir + "/data", dir + "/pipelines", log_, dir, workers) {
    if (!crash_at.empty()) {
      daemon_.set_env({absl::StrCat("BACKFILL_TEST_CRASH_AT=", crash_at)});
    } else {
      daemon_.set_env({"BACKFILL_TEST_CRASH_AT"});
    }
  }
  ~TrialDaemon() {
    Untrack(daemon_.pid());
    daemon_.Kill();
  }

  Daemon& operator*() { return daemon_; }
  Daemon* operator->() { return &daemon_; }
  const std::string& log() const { return log_; }

  // Spawns it and waits until it serves (nullopt) or exits (its exit code;
  // -1 if it could not be spawned or does neither within `timeout`, and
  // is then killed). It serves once it has logged that it listens, which
  // it does after resuming its jobs, and answers `backfillctl datasets`.
  //
  // The ports are free when chosen, but another process (a test beside
  // the harness) may take one before the daemon binds it: a daemon that
  // exits because it cannot listen is started again on new ports, up to
  // four times.
  std::optional<int> Start(seconds timeout = seconds(90)) {
    const auto deadline = Clock::now() + timeout;
    for (int attempt = 1;; ++attempt) {
      const size_t log_before = ReadFile(log_).size();
      if (!daemon_.Spawn()) return -1;
      Track(daemon_.pid());
      std::optional<int> exited;
      while (Clock::now() < deadline) {
        if (HasExited(daemon_.pid())) {
          exited = Reap();
          break;
        }
        if (absl::StrContains(ReadFile(log_), "backfilld listening on") &&
            daemon_.Ctl({"datasets"}, seconds(20)).exit_code == 0) {
          return std::nullopt;
        }
        std::this_thread::sleep_for(milliseconds(50));
      }
      if (!exited) {
        Untrack(daemon_.pid());
        daemon_.Kill();
        return -1;
      }
      const std::string attempt_log = ReadFile(log_).substr(log_before);
      const bool port_taken =
          absl::StrContains(attempt_log, "cannot listen on --listen") ||
          absl::StrContains(attempt_log, "cannot serve metrics on");
      if (!port_taken || attempt == 4) return exited;
    }
  }

  // The exit code of a daemon that has exited.
  int Reap() {
    const pid_t pid = daemon_.pid();
    std::optional<int> code = daemon_.Wait(seconds(30));
    Untrack(pid);
    return code.value_or(-1);
  }

  // SIGTERM and wait: its exit code, -1 if it still runs after 90 s.
  int Stop() {
    const pid_t pid = daemon_.pid();
    daemon_.Signal(SIGTERM);
    std::optional<int> code = daemon_.Wait(seconds(90));
    if (!code) {
      daemon_.Kill();
      Untrack(pid);
      return -1;
    }
    Untrack(pid);
    return *code;
  }

 private:
  std::string log_;
  Daemon daemon_;
};

// What became of a daemon while a job ran on it.
struct Outcome {
  bool died = false;
  int exit_code = 0;       // when died
  std::string state;       // the job's terminal state, when it ended
  bool timed_out = false;  // neither within the timeout
};

// Waits until the daemon dies or job `job` (if known) is terminal.
Outcome WaitDeathOrEnd(TrialDaemon& d, const std::string& job,
                       seconds timeout) {
  Outcome out;
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (HasExited(d->pid())) {
      out.died = true;
      out.exit_code = d.Reap();
      return out;
    }
    if (!job.empty()) {
      RunResult r = d->CtlJson({"status", job}, seconds(20));
      const std::string state = e2e::JsonString(r.out, "state");
      if (r.exit_code == 0 && e2e::IsTerminalState(state)) {
        out.state = state;
        return out;
      }
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  out.timed_out = true;
  return out;
}

std::string Tail(const std::string& text, int lines) {
  std::vector<std::string> all = absl::StrSplit(text, '\n');
  while (!all.empty() && all.back().empty()) all.pop_back();
  const size_t from = all.size() > static_cast<size_t>(lines)
                          ? all.size() - static_cast<size_t>(lines)
                          : 0;
  std::vector<std::string> tail(all.begin() + static_cast<long>(from),
                                all.end());
  return absl::StrJoin(tail, "\n");
}

// --- Options -----------------------------------------------------------------

struct Options {
  int trials = 3;
  std::vector<std::string> points;
  uint64_t seed = 0;
  int workers = 2;
  bool keep = false;
  std::string bin_dir = BACKFILL_BIN_DIR;
};

constexpr char kUsage[] =
    "usage: backfill_crash_harness [--trials N] [--points p1,p2] [--seed S]\n"
    "                              [--workers W] [--keep] [--bin-dir DIR]\n"
    "\n"
    "Kills backfilld with SIGKILL at each crash point during a correction\n"
    "backfill, restarts it and checks that nothing was lost or doubled.\n"
    "\n"
    "  --trials N     trials per crash point (default 3; the environment\n"
    "                 variable BACKFILL_CRASH_TRIALS, when set, overrides it)\n"
    "  --points LIST  comma-separated crash points (default: all of them)\n"
    "  --seed S       random seed (default: random; printed, so that a run\n"
    "                 can be repeated)\n"
    "  --workers W    backfilld --workers (default 2)\n"
    "  --keep         keep every trial's directory (failed ones always are)\n"
    "  --bin-dir DIR  where backfilld and backfillctl are (default: this\n"
    "                 build's bin directory)\n";

std::string AllPoints() {
  std::vector<std::string> names;
  for (const char* p : kCrashPoints) names.push_back(p);
  return absl::StrJoin(names, ",");
}

int PointIndex(const std::string& name) {
  for (size_t i = 0; i < std::size(kCrashPoints); ++i) {
    if (name == kCrashPoints[i]) return static_cast<int>(i);
  }
  return -1;
}

// Parses the flags; exits 2 on a usage error, 0 after --help.
Options ParseFlags(int argc, char** argv) {
  Options o;
  std::random_device device;
  o.seed = (static_cast<uint64_t>(device()) << 32) ^ device();
  std::string points = AllPoints();
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "backfill_crash_harness: %s\n%s", message.c_str(),
                 kUsage);
    std::exit(2);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "-h" || flag == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (flag == "--trials") {
      if (!absl::SimpleAtoi(value(), &o.trials) || o.trials < 1) {
        fail("--trials must be a number >= 1");
      }
    } else if (flag == "--points") {
      points = value();
    } else if (flag == "--seed") {
      if (!absl::SimpleAtoi(value(), &o.seed)) fail("--seed must be a number");
    } else if (flag == "--workers") {
      if (!absl::SimpleAtoi(value(), &o.workers) || o.workers < 1) {
        fail("--workers must be a number >= 1");
      }
    } else if (flag == "--keep") {
      o.keep = true;
    } else if (flag == "--bin-dir") {
      o.bin_dir = value();
    } else {
      fail(absl::StrCat("unknown flag ", flag));
    }
  }
  if (const char* env = std::getenv("BACKFILL_CRASH_TRIALS");
      env != nullptr && *env != '\0') {
    if (!absl::SimpleAtoi(env, &o.trials) || o.trials < 1) {
      fail("BACKFILL_CRASH_TRIALS must be a number >= 1");
    }
  }
  for (absl::string_view p : absl::StrSplit(points, ',', absl::SkipEmpty())) {
    const std::string name(p);
    if (PointIndex(name) < 0) {
      fail(absl::StrCat("no crash point \"", name, "\"; known: ", AllPoints()));
    }
    if (std::find(o.points.begin(), o.points.end(), name) == o.points.end()) {
      o.points.push_back(name);
    }
  }
  if (o.points.empty()) fail("--points names no crash point");
  return o;
}

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
