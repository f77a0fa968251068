// Support for the end-to-end tests and the crash harness: they run the
// real backfilld and backfillctl binaries (from the build's bin/) on a
// temporary data directory and free ports, and check the warehouse with
// plain SQL, independently of the service.
//
//   RunProcess      runs a command with captured output and a timeout
//   Daemon          one backfilld process: spawn, wait, signal, kill
//   Sqlite          a plain sqlite3 connection for independent checks
//   WriteWarehouse  the orders / customers fixture; ExpectedRevenue computes
//                   daily_revenue from it with plain SQL
//   E2eTest         a fixture owning a temporary root, daemons and logs
//
// Header-only; nothing here is thread-safe. Every daemon a test starts is
// killed in TearDown.

#ifndef BACKFILL_TESTS_TESTING_E2E_SUPPORT_H_
#define BACKFILL_TESTS_TESTING_E2E_SUPPORT_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/civil_time.h"
#include "backfill/v1/backfill.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/testing/executable_dir.h"
#include "tests/testing/revenue_pipeline.h"

namespace backfill {
namespace e2e {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

// The directory Bin() takes the binaries from: the test's own (the build's
// bin/, testing/executable_dir.h) unless SetBinDir() chose another (the crash
// harness's --bin-dir). Set it before any daemon starts. A list field of the
// plan entry of `dataset` in the output of `backfillctl --json plan` (a
// PlanBackfillResponse) or `--json status` (a Backfill, whose `plan` lists the
// same entries), parsed with protobuf's JSON utilities: `key` is "partitions"
// or "partition_reasons".
// {"<no DATASET>"} when there is no entry for it; {"<bad json: ...>"} when
// the output parses as neither.
inline std::vector<std::string> PlanArray(const std::string& json,
                                          const std::string& dataset,
                                          const std::string& key) {
  google::protobuf::RepeatedPtrField<v1::DatasetPlan> entries;
  v1::PlanBackfillResponse plan;
  v1::Backfill backfill;
  if (google::protobuf::util::JsonStringToMessage(json, &plan).ok()) {
    entries = plan.datasets();
  } else if (const auto parsed =
                 google::protobuf::util::JsonStringToMessage(json, &backfill);
             parsed.ok()) {
    entries = backfill.plan();
  } else {
    return {"<bad json: " + parsed.ToString() + ">"};
  }
  for (const v1::DatasetPlan& d : entries) {
    if (d.dataset() != dataset) continue;
    const auto& field =
        key == "partitions" ? d.partitions() : d.partition_reasons();
    return std::vector<std::string>(field.begin(), field.end());
  }
  return {"<no " + dataset + ">"};
}

inline std::string& BinDir() {
  static std::string* dir =
      new std::string(::backfill::testing::ExecutableDir());
  return *dir;
}
inline void SetBinDir(const std::string& dir) { BinDir() = dir; }

inline std::string Bin(const std::string& name) {
  return absl::StrCat(BinDir(), "/", name);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0).
inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// The exit code of a wait status; 128 + signal for a killed process.
inline int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

struct RunResult {
  std::string command;
  int exit_code = -1;
  bool timed_out = false;
  std::string out;
  std::string err;
};

inline std::ostream& operator<<(std::ostream& os, const RunResult& r) {
  return os << "$ " << r.command << "\nexit " << r.exit_code
            << (r.timed_out ? " (timed out)" : "") << "\nstdout: " << r.out
            << "\nstderr: " << r.err;
}

// The environment of this process with `overrides` applied: "NAME=VALUE"
// sets NAME, a bare "NAME" removes it.
inline std::vector<std::string> EnvironmentWith(
    const std::vector<std::string>& overrides) {
  auto name_of = [](const std::string& entry) {
    return entry.substr(0, entry.find('='));
  };
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    bool overridden = false;
    for (const std::string& o : overrides) {
      overridden = overridden || name_of(o) == name_of(entry);
    }
    if (!overridden) env.push_back(entry);
  }
  for (const std::string& o : overrides) {
    if (o.find('=') != std::string::npos) env.push_back(o);
  }
  return env;
}

// Runs argv[0] with stdout and stderr captured into files under `scratch`
// (of their own for each call, so that threads may run processes at once),
// stdin from `stdin_path` (/dev/null by default), the environment changed
// by `env` (see EnvironmentWith). Kills it after `timeout`.
inline RunResult RunProcess(const std::vector<std::string>& argv,
                            const std::string& scratch, seconds timeout,
                            const std::string& stdin_path = "/dev/null",
                            const std::vector<std::string>& env = {}) {
  RunResult result;
  result.command = absl::StrJoin(argv, " ");
  if (!env.empty()) {
    result.command = absl::StrCat(absl::StrJoin(env, " "), " ", result.command);
  }
  static std::atomic<int64_t> runs{0};
  const std::string stem = absl::StrCat(scratch, "/run.", runs++);
  const std::string out_path = stem + ".out";
  const std::string err_path = stem + ".err";
  // Built before fork(): the child only execs.
  const std::vector<std::string> envp_strings = EnvironmentWith(env);
  std::vector<char*> envp;
  for (const std::string& e : envp_strings)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int in = open(stdin_path.c_str(), O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  if (pid < 0) {
    result.err = "fork failed";
    return result;
  }
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  while (true) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  result.exit_code = ExitCode(status);
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return result;
}

// --- Minimal JSON field access -------------------------------------------
// backfillctl --json prints protobuf JSON with the proto field names. The
// tests only need a few scalar fields, so they are found by key; the first
// occurrence is the outermost one for the messages used here (fields print
// in field-number order, and `id`/`state` come first in a Backfill). The
// lowerCamelCase spelling is accepted too.

inline std::string CamelCase(const std::string& name) {
  std::string out;
  bool upper = false;
  for (char c : name) {
    if (c == '_') {
      upper = true;
    } else {
      out += upper ? static_cast<char>(std::toupper(c)) : c;
      upper = false;
    }
  }
  return out;
}

// The raw value text (quotes stripped from strings) of the first `key`.
inline std::optional<std::string> JsonField(const std::string& json,
                                            const std::string& key) {
  for (const std::string& k : {key, CamelCase(key)}) {
    const std::regex re("\"" + k +
                        "\"\\s*:\\s*(\"((?:[^\"\\\\]|\\\\.)*)\"|[-+0-9.eE]+|"
                        "true|false|null)");
    std::smatch m;
    if (std::regex_search(json, m, re)) {
      return m[2].matched ? m[2].str() : m[1].str();
    }
  }
  return std::nullopt;
}

// An integer field (proto3 JSON prints int64 as strings); 0 if absent.
inline int64_t JsonInt(const std::string& json, const std::string& key) {
  std::optional<std::string> v = JsonField(json, key);
  double d = 0;
  if (!v || !absl::SimpleAtod(*v, &d)) return 0;
  return static_cast<int64_t>(d);
}

inline std::string JsonString(const std::string& json, const std::string& key) {
  return JsonField(json, key).value_or("");
}

inline int CountJobs(const std::string& list_json) {
  const std::regex re("\"id\"\\s*:\\s*\"");
  return static_cast<int>(std::distance(
      std::sregex_iterator(list_json.begin(), list_json.end(), re),
      std::sregex_iterator()));
}

inline bool IsTerminalState(const std::string& state) {
  for (const char* s : {"SUCCEEDED", "FAILED", "CANCELLED", "ROLLED_BACK",
                        "VALIDATION_FAILED", "DOWNSTREAM_UNHEALTHY"}) {
    if (state == absl::StrCat("BACKFILL_STATE_", s)) return true;
  }
  return false;
}

// --- The warehouse ---------------------------------------------------------

class Sqlite {
 public:
  explicit Sqlite(const std::string& path, bool read_only = false) {
    int flags = read_only ? SQLITE_OPEN_READONLY
                          : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      error_ = absl::StrCat("open ", path, ": ", sqlite3_errmsg(db_));
    } else {
      sqlite3_busy_timeout(db_, 10000);
    }
  }
  ~Sqlite() { sqlite3_close(db_); }
  Sqlite(const Sqlite&) = delete;
  Sqlite& operator=(const Sqlite&) = delete;

  sqlite3* get() { return db_; }
  const std::string& error() const { return error_; }
  std::string errmsg() { return sqlite3_errmsg(db_); }

  bool Exec(const std::string& sql) {
    char* msg = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
      error_ = absl::StrCat(sql, ": ", msg ? msg : "?");
      sqlite3_free(msg);
      return false;
    }
    return true;
  }

  // Every row of a query as text columns (NULL as "NULL"); text parameters
  // bound in order. nullopt (and error()) on failure.
  std::optional<std::vector<std::vector<std::string>>> Query(
      const std::string& sql, const std::vector<std::string>& params = {}) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      error_ = absl::StrCat(sql, ": ", sqlite3_errmsg(db_));
      return std::nullopt;
    }
    for (size_t i = 0; i < params.size(); ++i) {
      sqlite3_bind_text(stmt, static_cast<int>(i + 1), params[i].c_str(), -1,
                        SQLITE_TRANSIENT);
    }
    std::vector<std::vector<std::string>> rows;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
        if (sqlite3_column_type(stmt, c) == SQLITE_NULL) {
          row.push_back("NULL");
        } else if (sqlite3_column_type(stmt, c) == SQLITE_FLOAT) {
          row.push_back(
              absl::StrFormat("%.17g", sqlite3_column_double(stmt, c)));
        } else {
          row.push_back(
              reinterpret_cast<const char*>(sqlite3_column_text(stmt, c)));
        }
      }
      rows.push_back(std::move(row));
    }
    if (rc != SQLITE_DONE)
      error_ = absl::StrCat(sql, ": ", sqlite3_errmsg(db_));
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) return std::nullopt;
    return rows;
  }

 private:
  sqlite3* db_ = nullptr;
  std::string error_;
};

inline constexpr const char* kRegions[] = {"north", "south", "east", "west"};
inline constexpr int kCustomers = 40;

// Writes raw_orders and dim_customers: `days` days from 2025-01-01 with
// `orders_per_day` orders each. Amounts and refunds are whole numbers stored
// as REAL, so every sum is exact whatever order it is added in. Refunds are
// non-zero on every third day only.
inline void WriteWarehouse(const std::string& path, int days,
                           int orders_per_day) {
  Sqlite db(path);
  ASSERT_TRUE(db.error().empty()) << db.error();
  ASSERT_TRUE(
      db.Exec("BEGIN;"
              "CREATE TABLE dim_customers(customer_id INTEGER PRIMARY KEY,"
              " name TEXT NOT NULL, region TEXT NOT NULL);"
              "CREATE TABLE raw_orders(order_id INTEGER PRIMARY KEY,"
              " order_date TEXT NOT NULL, customer_id INTEGER NOT NULL,"
              " amount REAL NOT NULL, refund REAL NOT NULL DEFAULT 0);"))
      << db.error();
  std::mt19937_64 rng(42);
  auto uniform = [&rng](int64_t lo, int64_t hi) {
    return lo +
           static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(
      sqlite3_prepare_v2(db.get(), "INSERT INTO dim_customers VALUES (?, ?, ?)",
                         -1, &stmt, nullptr),
      SQLITE_OK);
  for (int id = 1; id <= kCustomers; ++id) {
    const std::string name = absl::StrCat("customer ", id);
    sqlite3_bind_int(stmt, 1, id);
    sqlite3_bind_text(stmt, 2, name.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 3, kRegions[uniform(0, 3)], -1, SQLITE_STATIC);
    ASSERT_EQ(sqlite3_step(stmt), SQLITE_DONE) << db.errmsg();
    sqlite3_reset(stmt);
  }
  sqlite3_finalize(stmt);
  ASSERT_EQ(sqlite3_prepare_v2(db.get(),
                               "INSERT INTO raw_orders VALUES (?, ?, ?, ?, ?)",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  int64_t order_id = 0;
  for (int d = 0; d < days; ++d) {
    const std::string date =
        absl::FormatCivilTime(absl::CivilDay(2025, 1, 1) + d);
    for (int i = 0; i < orders_per_day; ++i) {
      const int64_t amount = uniform(1, 500);
      const bool refunded = d % 3 == 0 && uniform(0, 3) == 0;
      sqlite3_bind_int64(stmt, 1, ++order_id);
      sqlite3_bind_text(stmt, 2, date.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(stmt, 3, uniform(1, kCustomers));
      sqlite3_bind_double(stmt, 4, static_cast<double>(amount));
      sqlite3_bind_double(stmt, 5,
                          refunded ? static_cast<double>(amount / 2) : 0.0);
      ASSERT_EQ(sqlite3_step(stmt), SQLITE_DONE) << db.errmsg();
      sqlite3_reset(stmt);
    }
  }
  sqlite3_finalize(stmt);
  ASSERT_TRUE(
      db.Exec("CREATE INDEX raw_orders_by_date ON raw_orders(order_date);"
              "COMMIT;"))
      << db.error();
}

// The example pipeline of docs/pipeline-spec.md. `slow` adds an uncorrelated
// scalar subquery that counts to 200000 (computed once per partition, ~50 ms)
// so that a job of a hundred partitions on one worker runs long enough to be
// interrupted; it does not change the result. `more_datasets` are appended to
// the `datasets:` list.
inline std::string PipelineYaml(bool slow,
                                const std::string& more_datasets = "") {
  const std::string spin =
      slow ? "        AND (WITH RECURSIVE spin(n) AS (SELECT 1 UNION ALL\n"
             "             SELECT n + 1 FROM spin WHERE n < 200000)\n"
             "             SELECT COUNT(*) FROM spin) > 0\n"
           : "";
  return absl::StrCat("warehouse: {engine: sqlite, path: warehouse.db}\n",
                      fixtures::RevenuePipelineYaml(spin, more_datasets));
}

using Rows = std::vector<std::vector<std::string>>;

// daily_revenue as the fixed logic computes it from the raw tables, for
// days in [from, to), ordered by (ds, region).
inline Rows ExpectedRevenue(const std::string& warehouse,
                            const std::string& from, const std::string& to) {
  Sqlite db(warehouse, /*read_only=*/true);
  auto rows = db.Query(
      "SELECT o.order_date, c.region, SUM(o.amount - o.refund), COUNT(*) "
      "FROM raw_orders o JOIN dim_customers c ON c.customer_id = o.customer_id "
      "WHERE o.order_date >= ?1 AND o.order_date < ?2 "
      "GROUP BY 1, 2 ORDER BY 1, 2",
      {from, to});
  EXPECT_TRUE(rows.has_value()) << db.error();
  return rows.value_or(Rows{});
}

// The published daily_revenue for days in [from, to), same shape.
inline Rows PublishedRevenue(const std::string& warehouse,
                             const std::string& from, const std::string& to) {
  Sqlite db(warehouse, /*read_only=*/true);
  auto rows = db.Query(
      "SELECT ds, region, CAST(revenue AS REAL), orders FROM daily_revenue "
      "WHERE ds >= ?1 AND ds < ?2 ORDER BY 1, 2",
      {from, to});
  EXPECT_TRUE(rows.has_value()) << db.error();
  return rows.value_or(Rows{});
}

// What `backfillctl diff` must show for daily_revenue over the days in
// [from, to) when the fixed logic replaces what is published, by plain SQL
// (run it before the job publishes): per day, in day order, the published
// rows, the recomputed rows, the rows whose revenue or orders differ and the
// revenue delta ("%.6f").
inline Rows ExpectedRevenueDiff(const std::string& warehouse,
                                const std::string& from,
                                const std::string& to) {
  Sqlite db(warehouse, /*read_only=*/true);
  auto rows = db.Query(
      "WITH fixed AS (SELECT o.order_date AS ds, c.region AS region, "
      "SUM(o.amount - o.refund) AS revenue, COUNT(*) AS orders FROM "
      "raw_orders o JOIN dim_customers c ON c.customer_id = o.customer_id "
      "WHERE o.order_date >= ?1 AND o.order_date < ?2 GROUP BY 1, 2) "
      "SELECT f.ds, (SELECT COUNT(*) FROM daily_revenue p WHERE p.ds = f.ds), "
      "COUNT(*), SUM(p.revenue IS NOT f.revenue OR p.orders IS NOT "
      "f.orders), printf('%.6f', SUM(f.revenue) - (SELECT TOTAL(revenue) "
      "FROM daily_revenue p WHERE p.ds = f.ds)) FROM fixed f JOIN "
      "daily_revenue p USING (ds, region) GROUP BY f.ds ORDER BY f.ds",
      {from, to});
  EXPECT_TRUE(rows.has_value()) << db.error();
  return rows.value_or(Rows{});
}

// The table row of `backfillctl diff` output for `partition`, split on
// blanks: PARTITION BEFORE AFTER ADDED REMOVED CHANGED UNCHANGED and one
// delta per measure (revenue, orders). Empty when there is none.
inline std::vector<std::string> DiffTableRow(const std::string& text,
                                             const std::string& partition) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!absl::StartsWith(line, partition + " ")) continue;
    std::istringstream words(line);
    std::vector<std::string> row;
    for (std::string w; words >> w;) row.push_back(w);
    return row;
  }
  return {};
}

// Checks one day of `backfillctl diff` output against its row of
// ExpectedRevenueDiff: counts, no row added or removed, the revenue delta
// (to 1e-6) and orders unchanged.
inline void ExpectRevenueDiffRow(const std::string& diff_text,
                                 const std::vector<std::string>& expected) {
  SCOPED_TRACE(expected[0]);
  const std::vector<std::string> row = DiffTableRow(diff_text, expected[0]);
  ASSERT_EQ(row.size(), 9u) << diff_text;
  EXPECT_EQ(row[1], expected[1]);
  EXPECT_EQ(row[2], expected[2]);
  EXPECT_EQ(row[3], "0");
  EXPECT_EQ(row[4], "0");
  EXPECT_EQ(row[5], expected[3]);
  double shown = 0, want = 0;
  ASSERT_TRUE(absl::SimpleAtod(row[7], &shown)) << row[7];
  ASSERT_TRUE(absl::SimpleAtod(expected[4], &want)) << expected[4];
  EXPECT_NEAR(shown, want, 1e-6);
  EXPECT_EQ(row[8], "0");
}

// --- The daemon ------------------------------------------------------------

class Daemon {
 public:
  Daemon(std::string data_dir, std::string pipelines_dir, std::string log,
         std::string scratch, int workers)
      : data_dir_(std::move(data_dir)),
        pipelines_dir_(std::move(pipelines_dir)),
        log_(std::move(log)),
        scratch_(std::move(scratch)),
        workers_(workers) {}
  ~Daemon() { Kill(); }

  // Listen on this port instead of a fresh free one (0: a fresh one).
  void set_listen_port(int port) { fixed_port_ = port; }
  // Further flags for the next Spawn(), after the usual ones.
  void set_extra_args(std::vector<std::string> args) {
    extra_args_ = std::move(args);
  }
  // Environment changes for the next Spawn() (see EnvironmentWith).
  void set_env(std::vector<std::string> env) { env_ = std::move(env); }
  // The daemon binary Spawn() runs, by name in BinDir(): "backfilld", or
  // "backfilld_faults" (backfilld with the fault VFS, BACKFILL_TEST_FAULTS).
  void set_binary(std::string name) { binary_ = std::move(name); }
  // The bearer token Ctl() (and so Start()) sends; "" for none.
  void set_ctl_token(std::string token) { ctl_token_ = std::move(token); }
  pid_t pid() const { return pid_; }

  // Forks backfilld on its ports: a fresh free metrics port and a fresh
  // free gRPC port unless set_listen_port() chose one. Without a pipelines
  // directory, --pipelines is not passed. Returns at once.
  ::testing::AssertionResult Spawn() {
    port_ = fixed_port_ > 0 ? fixed_port_ : FreePort();
    metrics_port_ = FreePort();
    while (metrics_port_ == port_) metrics_port_ = FreePort();
    std::vector<std::string> argv = {Bin(binary_), "--data-dir", data_dir_};
    if (!pipelines_dir_.empty()) {
      argv.insert(argv.end(), {"--pipelines", pipelines_dir_});
    }
    argv.insert(argv.end(), {"--listen", address(), "--metrics-listen",
                             absl::StrCat("127.0.0.1:", metrics_port_),
                             "--workers", std::to_string(workers_)});
    argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
    const std::vector<std::string> envp_strings = EnvironmentWith(env_);
    std::vector<char*> envp;
    for (const std::string& e : envp_strings) {
      envp.push_back(const_cast<char*>(e.c_str()));
    }
    envp.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      int log = open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      int in = open("/dev/null", O_RDONLY);
      if (log < 0 || in < 0) _exit(126);
      dup2(in, 0);
      dup2(log, 1);
      dup2(log, 2);
      std::vector<char*> args;
      for (const std::string& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execve(args[0], args.data(), envp.data());
      _exit(127);
    }
    if (pid_ < 0) return ::testing::AssertionFailure() << "fork failed";
    return ::testing::AssertionSuccess();
  }

  // Spawn() and wait (bounded) until `backfillctl datasets` succeeds
  // against it.
  // The ports are free when chosen, but another process may take one
  // before the daemon binds it: a daemon that exits because it cannot
  // listen on a port Spawn() chose is started again on new ones, up to four
  // times.
  ::testing::AssertionResult Start() {
    ::testing::AssertionResult spawned = Spawn();
    if (!spawned) return spawned;
    const auto deadline = Clock::now() + seconds(90);
    RunResult last;
    size_t log_before = 0;
    int attempts = 1;
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        const std::string log = ReadFile(log_);
        const std::string attempt_log =
            log.substr(std::min(log_before, log.size()));
        const bool port_taken =
            (fixed_port_ == 0 &&
             attempt_log.find("cannot listen on --listen") !=
                 std::string::npos) ||
            attempt_log.find("cannot serve metrics on") != std::string::npos;
        if (port_taken && attempts < 4) {
          ++attempts;
          log_before = log.size();
          spawned = Spawn();
          if (!spawned) return spawned;
          continue;
        }
        return ::testing::AssertionFailure()
               << "backfilld exited with " << ExitCode(status)
               << " during start-up; log:\n"
               << log;
      }
      last = Ctl({"datasets"}, seconds(20));
      if (last.exit_code == 0) return ::testing::AssertionSuccess();
      std::this_thread::sleep_for(milliseconds(100));
    }
    return ::testing::AssertionFailure()
           << "backfilld did not answer `backfillctl datasets` within 90 s; "
           << "last attempt:\n"
           << last << "\nlog:\n"
           << ReadFile(log_);
  }

  RunResult Ctl(std::vector<std::string> args, seconds timeout = seconds(120),
                bool json = false) const {
    std::vector<std::string> argv = {Bin("backfillctl"), "--server", address()};
    if (json) argv.push_back("--json");
    if (!ctl_token_.empty()) argv.insert(argv.end(), {"--token", ctl_token_});
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, scratch_, timeout);
  }
  RunResult CtlJson(std::vector<std::string> args,
                    seconds timeout = seconds(120)) const {
    return Ctl(std::move(args), timeout, /*json=*/true);
  }

  void Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }

  // Waits for the daemon to exit; its exit code (128 + signal if killed),
  // or nullopt if it still runs after `timeout`.
  std::optional<int> Wait(seconds timeout) {
    if (pid_ <= 0) return std::nullopt;
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return ExitCode(status);
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return std::nullopt;
  }

  // For a daemon that must not start: Spawn() and wait (bounded) until it
  // exits; its exit code. nullopt if it logs that it listens, or still
  // runs after `timeout` (it is left running; Kill() or TearDown ends it).
  std::optional<int> SpawnExpectingExit(seconds timeout) {
    if (!Spawn()) return std::nullopt;
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return ExitCode(status);
      }
      if (absl::StrContains(ReadFile(log_), "backfilld listening on")) {
        return std::nullopt;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return std::nullopt;
  }

  // SIGKILL and reap, if it still runs.
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  const std::string& log() const { return log_; }

 private:
  std::string data_dir_;
  std::string pipelines_dir_;
  std::string log_;
  std::string scratch_;
  int workers_;
  int fixed_port_ = 0;
  std::vector<std::string> extra_args_;
  std::vector<std::string> env_;
  std::string binary_ = "backfilld";
  std::string ctl_token_;
  int port_ = 0;
  int metrics_port_ = 0;
  pid_t pid_ = -1;
};

// Runs `backfillctl submit ARGS... --wait --json`, expects it to end
// SUCCEEDED (exit 0) and returns the job's id ("" if it did not).
inline std::string SubmitSucceeded(
    Daemon& daemon, std::vector<std::string> args,
    std::chrono::seconds timeout = std::chrono::seconds(300)) {
  args.insert(args.begin(), "submit");
  args.push_back("--wait");
  RunResult r = daemon.CtlJson(args, timeout);
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(JsonString(r.out, "state"), "BACKFILL_STATE_SUCCEEDED") << r;
  return JsonString(r.out, "id");
}

// The same with a scope and `--reason REASON`.
inline std::string SubmitSucceeded(Daemon& daemon,
                                   std::vector<std::string> scope,
                                   const std::string& reason) {
  scope.insert(scope.end(), {"--reason", reason});
  return SubmitSucceeded(daemon, std::move(scope));
}

// An HTTP/1.0 GET of http://127.0.0.1:port/path; the whole response.
inline std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request =
        absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1:", port,
                     "\r\nAccept: text/plain\r\nConnection: close\r\n\r\n");
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buf[8192];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) response.append(buf, n);
    }
  }
  close(fd);
  return response;
}

// Whether `log` has a line starting with "backfilld: " (main()'s start-up
// error, as opposed to library logging) that contains `text`.
inline bool HasStartupError(const std::string& log, const std::string& text) {
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    if (absl::StartsWith(line, "backfilld: ") &&
        absl::StrContains(line, text)) {
      return true;
    }
  }
  return false;
}

// --- The fixture -----------------------------------------------------------

class E2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(Bin("backfilld"))) << Bin("backfilld");
    ASSERT_TRUE(fs::exists(Bin("backfillctl"))) << Bin("backfillctl");
    const char* tmp = std::getenv("TMPDIR");
    std::string templ =
        absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/backfill-e2e-XXXXXX");
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    root_ = templ;
    data_dir_ = root_ + "/data";
    pipelines_dir_ = root_ + "/pipelines";
    fs::create_directories(data_dir_);
    fs::create_directories(pipelines_dir_);
    warehouse_ = data_dir_ + "/warehouse.db";
  }

  void TearDown() override {
    for (auto& d : daemons_) d->Kill();
    const bool failed = HasFailure();
    for (auto& d : daemons_) {
      const std::string log = ReadFile(d->log());
      if (failed || absl::StrContains(log, "Sanitizer") ||
          absl::StrContains(log, "runtime error:")) {
        std::fprintf(stderr, "----- %s -----\n%s\n", d->log().c_str(),
                     log.c_str());
      }
    }
    daemons_.clear();
    if (failed) {
      std::fprintf(stderr, "keeping %s for inspection\n", root_.c_str());
    } else if (!root_.empty()) {
      std::error_code ec;
      fs::remove_all(root_, ec);
    }
  }

  // Writes the warehouse and the pipeline file.
  void Prepare(int days, int orders_per_day, bool slow_transform) {
    ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, days, orders_per_day));
    ASSERT_NO_FATAL_FAILURE(
        WriteFile(pipelines_dir_ + "/e2e.yaml", PipelineYaml(slow_transform)));
  }
  // Makes daily_revenue of the pipeline Prepare() wrote require approval:
  // its jobs stop in AWAITING_APPROVAL after validation.
  void RequireApprovalOfDailyRevenue() {
    std::string yaml = ReadFile(pipelines_dir_ + "/e2e.yaml");
    const std::string anchor = "  - name: daily_revenue\n    kind: derived\n";
    ASSERT_TRUE(absl::StrContains(yaml, anchor)) << yaml;
    absl::StrReplaceAll({{anchor, anchor + "    require_approval: true\n"}},
                        &yaml);
    ASSERT_NO_FATAL_FAILURE(WriteFile(pipelines_dir_ + "/e2e.yaml", yaml));
  }

  Daemon& NewDaemon(int workers = 2) {
    return NewDaemonIn(data_dir_, pipelines_dir_, workers);
  }

  // A daemon on another data dir; an empty `pipelines_dir` passes no
  // --pipelines.
  Daemon& NewDaemonIn(const std::string& data_dir,
                      const std::string& pipelines_dir, int workers = 2) {
    const std::string log =
        absl::StrCat(root_, "/backfilld-", daemons_.size() + 1, ".log");
    daemons_.push_back(
        std::make_unique<Daemon>(data_dir, pipelines_dir, log, root_, workers));
    return *daemons_.back();
  }

  // backfillctl with exactly `args` (no --server or --json added), the
  // environment changed by `env` (see EnvironmentWith).
  RunResult RawCtl(const std::vector<std::string>& args,
                   const std::vector<std::string>& env = {},
                   seconds timeout = seconds(60)) {
    std::vector<std::string> argv = {Bin("backfillctl")};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, root_, timeout, "/dev/null", env);
  }

  // SIGTERM: the daemon drains and exits 0.
  void ExpectCleanSigterm(Daemon& daemon) {
    daemon.Signal(SIGTERM);
    std::optional<int> code = daemon.Wait(seconds(90));
    ASSERT_TRUE(code.has_value()) << "backfilld still runs 90 s after SIGTERM";
    EXPECT_EQ(*code, 0) << "backfilld exit code after SIGTERM";
  }

  // Polls `status JOB --json` until the job is terminal; its last JSON.
  std::string WaitTerminal(Daemon& daemon, const std::string& job,
                           seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    RunResult r;
    while (Clock::now() < deadline) {
      r = daemon.CtlJson({"status", job}, seconds(30));
      if (r.exit_code == 0 && IsTerminalState(JsonString(r.out, "state"))) {
        return r.out;
      }
      std::this_thread::sleep_for(milliseconds(200));
    }
    ADD_FAILURE() << job << " not terminal after " << timeout.count()
                  << " s; last status:\n"
                  << r;
    return r.out;
  }

  // Lineage rows of `job` for daily_revenue, per partition.
  std::map<std::string, int> LineageCounts(const std::string& job) {
    Sqlite db(data_dir_ + "/state.db", /*read_only=*/true);
    auto rows = db.Query(
        "SELECT \"partition\", COUNT(*) FROM lineage "
        "WHERE job_id = ?1 AND dataset = 'daily_revenue' GROUP BY 1",
        {job});
    std::map<std::string, int> counts;
    if (!rows) {
      auto tables =
          db.Query("SELECT name FROM sqlite_master WHERE type='table'");
      std::string names;
      for (const auto& t : tables.value_or(Rows{})) names += t[0] + " ";
      ADD_FAILURE() << "cannot read lineage from state.db: " << db.error()
                    << "\ntables: " << names;
      return counts;
    }
    for (const auto& row : *rows) counts[row[0]] = std::stoi(row[1]);
    return counts;
  }

  std::string root_;
  std::string data_dir_;
  std::string pipelines_dir_;
  std::string warehouse_;
  std::vector<std::unique_ptr<Daemon>> daemons_;
};

}  // namespace e2e
}  // namespace backfill

#endif  // BACKFILL_TESTS_TESTING_E2E_SUPPORT_H_
