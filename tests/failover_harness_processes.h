// The processes and options of the failover harness (failover_harness.cc):
// a replica of the group (one backfilld on a data dir and ports of its own,
// started, signalled, restarted under the same name), the group itself
// (its warehouse and state databases on the PostgreSQL test server, its
// pipeline, its three replicas and its initial load), and the command line.
//
// Ownership: a Group owns its replicas and connections and borrows the
// server, which must outlive it; it kills its replicas when destroyed, and
// drops its databases unless kept. The pids of running replicas are
// tracked so that a harness told to stop kills them: written by the
// harness's thread (and the threads that start replicas at once), read by
// its signal handler (sig_atomic_t). The rest is used by one thread.

#ifndef BACKFILL_TESTS_FAILOVER_HARNESS_PROCESSES_H_
#define BACKFILL_TESTS_FAILOVER_HARNESS_PROCESSES_H_

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/failover_harness_model.h"
#include "tests/testing/e2e_support.h"
#include "tests/testing/e2e_warehouses.h"
#include "tests/testing/executable_dir.h"
#include "tests/testing/harness_processes.h"
#include "tests/testing/postgres_test_server.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill::failover {

using harness::HasExited;
using harness::OnStopSignal;
using harness::Tail;
using harness::Track;
using harness::Untrack;

using e2e::Clock;
using e2e::Daemon;
using e2e::ReadFile;
using e2e::RunResult;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The raw tables: kDays days from 2025-01-01 (January to April), each with
// kOrdersPerDay orders over every region.
inline constexpr int kDays = 120;
inline constexpr char kFirstDay[] = "2025-01-01";
inline constexpr char kEndDay[] = "2025-05-01";  // exclusive
inline constexpr int kOrdersPerDay = 12;
inline constexpr int kReplicas = 3;
inline constexpr int kLeaseSeconds = 2;

// --- A replica ---------------------------------------------------------------

// One backfilld of the group, named r1..r3, on its own data dir; its log
// (appended to across restarts) beside it.
class Replica {
 public:
  Replica(const std::string& group_dir, int index, int workers,
          const std::string& state_dsn)
      : name_(absl::StrCat("r", index + 1)),
        log_(absl::StrCat(group_dir, "/", name_, ".log")),
        daemon_(absl::StrCat(group_dir, "/", name_), group_dir + "/pipelines",
                log_, group_dir + "/scratch", workers) {
    daemon_.set_extra_args({"--state-dsn", state_dsn, "--node-name", name_,
                            "--lease-seconds", std::to_string(kLeaseSeconds)});
  }
  ~Replica() { Kill(); }

  const std::string& name() const { return name_; }
  const std::string& log() const { return log_; }
  Daemon& daemon() { return daemon_; }
  pid_t pid() const { return daemon_.pid(); }
  bool stopped() const { return stopped_; }
  // Running and not stopped: it answers.
  bool serving() const { return !stopped_ && !HasExited(daemon_.pid()); }

  // Spawns it (BACKFILL_TEST_CRASH_AT=`crash_at` unless empty) and waits
  // until it serves: it has logged that it listens and answers
  // `backfillctl datasets`. A daemon that exits because another process
  // took a port first is started again on new ports, up to four times.
  // False and `error` if it exits otherwise or does not serve within 90 s
  // (it is then killed).
  bool Start(const std::string& crash_at, std::string* error) {
    daemon_.set_env({crash_at.empty()
                         ? std::string("BACKFILL_TEST_CRASH_AT")
                         : absl::StrCat("BACKFILL_TEST_CRASH_AT=", crash_at)});
    stopped_ = false;
    const auto deadline = Clock::now() + seconds(90);
    for (int attempt = 1;; ++attempt) {
      const size_t log_before = ReadFile(log_).size();
      if (!daemon_.Spawn()) {
        *error = absl::StrCat(name_, ": fork failed");
        return false;
      }
      Track(daemon_.pid());
      bool exited = false;
      while (Clock::now() < deadline) {
        if (HasExited(daemon_.pid())) {
          exited = true;
          break;
        }
        if (absl::StrContains(ReadFile(log_).substr(log_before),
                              "backfilld listening on") &&
            daemon_.Ctl({"datasets"}, seconds(20)).exit_code == 0) {
          return true;
        }
        std::this_thread::sleep_for(milliseconds(50));
      }
      if (!exited) {
        Kill();
        *error = absl::StrCat(name_, " did not serve within 90 s");
        return false;
      }
      const int code = Reap();
      const std::string attempt_log = ReadFile(log_).substr(log_before);
      const bool port_taken =
          absl::StrContains(attempt_log, "cannot listen on --listen") ||
          absl::StrContains(attempt_log, "cannot serve metrics on");
      if (!port_taken || attempt == 4) {
        *error = absl::StrCat(name_, " exited with ", code,
                              " while starting:\n", Tail(attempt_log, 15));
        return false;
      }
    }
  }

  // SIGKILL and reap, if it runs.
  void Kill() {
    const pid_t pid = daemon_.pid();
    daemon_.Kill();
    Untrack(pid);
    stopped_ = false;
  }
  void Signal(int sig) {
    daemon_.Signal(sig);
    if (sig == SIGSTOP) stopped_ = true;
    if (sig == SIGCONT) stopped_ = false;
  }
  // The exit code of a daemon that has exited (-1 if it still runs after
  // `timeout`).
  int Reap(seconds timeout = seconds(30)) {
    const pid_t pid = daemon_.pid();
    const std::optional<int> code = daemon_.Wait(timeout);
    if (code) Untrack(pid);
    return code.value_or(-1);
  }

 private:
  std::string name_;
  std::string log_;
  Daemon daemon_;
  bool stopped_ = false;
};

// --- Options -----------------------------------------------------------------

struct Options {
  int trials = 20;
  uint64_t seed = 0;
  bool keep = false;
  int batch = 10;  // trials per group (databases and replicas reused)
  int workers = 2;
  std::vector<int> kinds;
  std::string bin_dir = ::backfill::testing::ExecutableDir();
};

inline constexpr char kUsage[] =
    "usage: backfill_failover_harness [--trials N] [--seed S] [--keep]\n"
    "                                 [--batch N] [--kinds k1,k2]\n"
    "                                 [--workers W] [--bin-dir DIR]\n"
    "\n"
    "Runs three backfilld replicas over a PostgreSQL state store and\n"
    "warehouse, disturbs them while they run correction backfills (kill -9,\n"
    "SIGSTOP/SIGCONT, SIGTERM) and checks with plain SQL that every job\n"
    "succeeded once, exactly as the raw tables say, and that no write of a\n"
    "fenced replica was accepted.\n"
    "\n"
    "  --trials N     trials in all (default 20)\n"
    "  --seed S       random seed (default: random; printed, so that a run\n"
    "                 can be repeated)\n"
    "  --keep         keep every group's directory (a failed trial's always\n"
    "                 is, with its databases)\n"
    "  --batch N      trials per group of replicas and databases (default\n"
    "                 10; a failed trial ends its group)\n"
    "  --kinds LIST   comma-separated disturbances (default: all of them):\n"
    "                 kill-random, kill-in-publish, kill-in-takeover,\n"
    "                 stop-holder, drain-holder\n"
    "  --workers W    backfilld --workers of each replica (default 2)\n"
    "  --bin-dir DIR  where backfilld and backfillctl are (default: this\n"
    "                 build's bin directory)\n";

// Parses the flags; exits 2 on a usage error, 0 after --help.
inline Options ParseFlags(int argc, char** argv) {
  Options o;
  std::random_device device;
  o.seed = (static_cast<uint64_t>(device()) << 32) ^ device();
  std::string kinds = absl::StrJoin(kKindNames, ",");
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "backfill_failover_harness: %s\n%s", message.c_str(),
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
    } else if (flag == "--seed") {
      if (!absl::SimpleAtoi(value(), &o.seed)) fail("--seed must be a number");
    } else if (flag == "--keep") {
      o.keep = true;
    } else if (flag == "--batch") {
      if (!absl::SimpleAtoi(value(), &o.batch) || o.batch < 1) {
        fail("--batch must be a number >= 1");
      }
    } else if (flag == "--kinds") {
      kinds = value();
    } else if (flag == "--workers") {
      if (!absl::SimpleAtoi(value(), &o.workers) || o.workers < 1) {
        fail("--workers must be a number >= 1");
      }
    } else if (flag == "--bin-dir") {
      o.bin_dir = value();
    } else {
      fail(absl::StrCat("unknown flag ", flag));
    }
  }
  for (absl::string_view k : absl::StrSplit(kinds, ',', absl::SkipEmpty())) {
    const int index = KindIndex(std::string(k));
    if (index < 0) fail(absl::StrCat("no disturbance \"", k, "\""));
    if (std::find(o.kinds.begin(), o.kinds.end(), index) == o.kinds.end()) {
      o.kinds.push_back(index);
    }
  }
  if (o.kinds.empty()) fail("--kinds names no disturbance");
  return o;
}

// --- The group ---------------------------------------------------------------

// Three replicas sharing a state database, publishing into a warehouse
// database of generated raw tables, with daily_revenue and its monthly
// rollup loaded once over every day.
class Group {
 public:
  Group(const Options& options, ::backfill::testing::PostgresTestServer* server,
        std::string dir, int number)
      : options_(options),
        server_(server),
        dir_(std::move(dir)),
        number_(number) {}
  ~Group() {
    replicas_.clear();  // killed
    if (!keep_) {
      for (const std::string& db : databases_) {
        server_->DropDatabase(db).IgnoreError();
      }
    }
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  const std::string& dir() const { return dir_; }
  const std::string& state_dsn() const { return state_dsn_; }
  Pg& wh() { return wh_; }
  Pg& state() { return state_; }
  Replica& replica(int i) { return *replicas_[static_cast<size_t>(i)]; }
  // Keeps the databases (and so the directory) after the group ends.
  void Keep() { keep_ = true; }
  bool kept() const { return keep_; }

  // Creates the databases and the pipeline, starts the replicas and loads
  // every day; false and `error` if any of it fails.
  bool Create(std::string* error) {
    namespace fs = std::filesystem;
    fs::create_directories(dir_ + "/pipelines");
    fs::create_directories(dir_ + "/scratch");
    absl::StatusOr<std::string> wh_db =
        server_->CreateDatabase(absl::StrCat("fo_wh_", number_));
    absl::StatusOr<std::string> state_db =
        server_->CreateDatabase(absl::StrCat("fo_state_", number_));
    if (!wh_db.ok() || !state_db.ok()) {
      *error = absl::StrCat("creating the databases: ",
                            wh_db.ok() ? state_db.status().ToString()
                                       : wh_db.status().ToString());
      return false;
    }
    databases_ = {*wh_db, *state_db};
    state_dsn_ = server_->Dsn(*state_db);
    if (!wh_.Connect(server_->Dsn(*wh_db)) || !state_.Connect(state_dsn_)) {
      *error = wh_.error().empty() ? state_.error() : wh_.error();
      return false;
    }
    // order_date compares bytewise (COLLATE "C"), as the partitions do.
    if (!wh_.Exec(absl::StrCat(
            "CREATE TABLE dim_customers (customer_id BIGINT PRIMARY KEY, "
            "name TEXT NOT NULL, region TEXT COLLATE \"C\" NOT NULL);"
            "CREATE TABLE raw_orders (order_id BIGINT PRIMARY KEY, order_date "
            "TEXT COLLATE \"C\" NOT NULL, customer_id BIGINT NOT NULL, amount "
            "DOUBLE PRECISION NOT NULL, refund DOUBLE PRECISION NOT NULL "
            "DEFAULT 0);"
            "CREATE INDEX raw_orders_by_date ON raw_orders (order_date);"
            "INSERT INTO dim_customers SELECT i, 'customer ' || i, "
            "(ARRAY['north', 'south', 'east', 'west'])[1 + i % 4] FROM "
            "generate_series(1, 40) i;"
            "INSERT INTO raw_orders SELECT d * ",
            kOrdersPerDay, " + k + 1, to_char(DATE '", kFirstDay,
            "' + d, 'YYYY-MM-DD'), 1 + ((d * ", kOrdersPerDay,
            " + k) * 7) % 40, 10 + ((d * ", kOrdersPerDay,
            " + k) * 37) % 90, CASE WHEN d % 3 = 0 THEN (d + k) % 5 ELSE 0 "
            "END FROM generate_series(0, ",
            kDays - 1, ") d, generate_series(0, ", kOrdersPerDay - 1,
            ") k; ANALYZE"))) {
      *error = wh_.error();
      return false;
    }
    // A partition takes some milliseconds (an uncorrelated count computed
    // once per statement), so that a job is still running when it is
    // disturbed.
    const std::string spin =
        "        AND (WITH RECURSIVE spin(n) AS (SELECT 1 UNION ALL\n"
        "             SELECT n + 1 FROM spin WHERE n < 100000)\n"
        "             SELECT COUNT(*) FROM spin) > 0\n";
    const e2e::PostgresTestWarehouse types;  // only its Adapt()
    std::ofstream(dir_ + "/pipelines/revenue.yaml")
        << "warehouse: {engine: postgres, dsn: \"" << server_->Dsn(*wh_db)
        << "\"}\n"
        << types.Adapt(fixtures::RevenuePipelineYaml(
               spin, fixtures::MonthlyRevenueYaml()));
    for (int i = 0; i < kReplicas; ++i) {
      replicas_.push_back(
          std::make_unique<Replica>(dir_, i, options_.workers, state_dsn_));
    }
    // The first alone (it creates the state store's schema), then the
    // others at once.
    if (!replicas_[0]->Start("", error)) return false;
    std::string errors[kReplicas];
    std::vector<std::thread> starting;
    for (int i = 1; i < kReplicas; ++i) {
      starting.emplace_back([this, i, &errors] {
        std::string e;
        if (!replicas_[static_cast<size_t>(i)]->Start("", &e)) errors[i] = e;
      });
    }
    for (std::thread& t : starting) t.join();
    for (const std::string& e : errors) {
      if (!e.empty()) {
        *error = e;
        return false;
      }
    }
    RunResult load = replicas_[0]->daemon().CtlJson(
        {"submit", "daily_revenue", "--from", kFirstDay, "--to", kEndDay,
         "--reason", "failover harness load", "--wait"},
        seconds(300));
    if (load.exit_code != 0 ||
        e2e::JsonString(load.out, "state") != "BACKFILL_STATE_SUCCEEDED") {
      *error = absl::StrCat("the initial load failed: exit ", load.exit_code,
                            "\n", load.out, load.err);
      return false;
    }
    return true;
  }

 private:
  const Options& options_;
  ::backfill::testing::PostgresTestServer* server_;
  std::string dir_;
  int number_;
  std::vector<std::string> databases_;
  std::string state_dsn_;
  Pg wh_;
  Pg state_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  bool keep_ = false;
};

}  // namespace backfill::failover

#endif  // BACKFILL_TESTS_FAILOVER_HARNESS_PROCESSES_H_
