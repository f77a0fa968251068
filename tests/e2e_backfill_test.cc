// End-to-end tests: the real backfilld and backfillctl binaries from
// BACKFILL_BIN_DIR against a warehouse the test writes itself. Every
// expectation about published data is computed by the test with plain SQL
// over the raw tables, independently of the service.
//
// Each test starts its daemons on free ports in its own temporary directory
// and kills any daemon still running in TearDown. A failing test keeps its
// directory and prints the daemons' logs.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

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
#include "absl/strings/strip.h"
#include "absl/time/civil_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/revenue_pipeline.h"

namespace backfill {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

std::string Bin(const std::string& name) {
  return absl::StrCat(BACKFILL_BIN_DIR, "/", name);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0).
int FreePort() {
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
int ExitCode(int status) {
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

std::ostream& operator<<(std::ostream& os, const RunResult& r) {
  return os << "$ " << r.command << "\nexit " << r.exit_code
            << (r.timed_out ? " (timed out)" : "") << "\nstdout: " << r.out
            << "\nstderr: " << r.err;
}

// The environment of this process with `overrides` applied: "NAME=VALUE"
// sets NAME, a bare "NAME" removes it.
std::vector<std::string> EnvironmentWith(
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

// Runs argv[0] with stdout and stderr captured into files under `scratch`,
// stdin from `stdin_path` (/dev/null by default), the environment changed
// by `env` (see EnvironmentWith). Kills it after `timeout`.
RunResult RunProcess(const std::vector<std::string>& argv,
                     const std::string& scratch, seconds timeout,
                     const std::string& stdin_path = "/dev/null",
                     const std::vector<std::string>& env = {}) {
  RunResult result;
  result.command = absl::StrJoin(argv, " ");
  if (!env.empty()) {
    result.command = absl::StrCat(absl::StrJoin(env, " "), " ", result.command);
  }
  const std::string out_path = scratch + "/run.out";
  const std::string err_path = scratch + "/run.err";
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
  return result;
}

// --- Minimal JSON field access -------------------------------------------
// backfillctl --json prints protobuf JSON with the proto field names. The
// tests only need a few scalar fields, so they are found by key; the first
// occurrence is the outermost one for the messages used here (fields print
// in field-number order, and `id`/`state` come first in a Backfill). The
// lowerCamelCase spelling is accepted too.

std::string CamelCase(const std::string& name) {
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
std::optional<std::string> JsonField(const std::string& json,
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
int64_t JsonInt(const std::string& json, const std::string& key) {
  std::optional<std::string> v = JsonField(json, key);
  double d = 0;
  if (!v || !absl::SimpleAtod(*v, &d)) return 0;
  return static_cast<int64_t>(d);
}

std::string JsonString(const std::string& json, const std::string& key) {
  return JsonField(json, key).value_or("");
}

int CountJobs(const std::string& list_json) {
  const std::regex re("\"id\"\\s*:\\s*\"");
  return static_cast<int>(std::distance(
      std::sregex_iterator(list_json.begin(), list_json.end(), re),
      std::sregex_iterator()));
}

bool IsTerminalState(const std::string& state) {
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

constexpr const char* kRegions[] = {"north", "south", "east", "west"};
constexpr int kCustomers = 40;

// Writes raw_orders and dim_customers: `days` days from 2025-01-01 with
// `orders_per_day` orders each. Amounts and refunds are whole numbers stored
// as REAL, so every sum is exact whatever order it is added in. Refunds are
// non-zero on every third day only.
void WriteWarehouse(const std::string& path, int days, int orders_per_day) {
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

// The DESIGN.md pipeline. `slow` adds an uncorrelated scalar subquery that
// counts to 200000 (computed once per partition, ~50 ms) so that a job of a
// hundred partitions on one worker runs long enough to be interrupted; it
// does not change the result.
// `more_datasets` are appended to the `datasets:` list.
std::string PipelineYaml(bool slow, const std::string& more_datasets = "") {
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
Rows ExpectedRevenue(const std::string& warehouse, const std::string& from,
                     const std::string& to) {
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
Rows PublishedRevenue(const std::string& warehouse, const std::string& from,
                      const std::string& to) {
  Sqlite db(warehouse, /*read_only=*/true);
  auto rows = db.Query(
      "SELECT ds, region, CAST(revenue AS REAL), orders FROM daily_revenue "
      "WHERE ds >= ?1 AND ds < ?2 ORDER BY 1, 2",
      {from, to});
  EXPECT_TRUE(rows.has_value()) << db.error();
  return rows.value_or(Rows{});
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

  // Forks backfilld on its ports: a fresh free metrics port and a fresh
  // free gRPC port unless set_listen_port() chose one. Without a pipelines
  // directory, --pipelines is not passed. Returns at once.
  ::testing::AssertionResult Spawn() {
    port_ = fixed_port_ > 0 ? fixed_port_ : FreePort();
    metrics_port_ = FreePort();
    while (metrics_port_ == port_) metrics_port_ = FreePort();
    std::vector<std::string> argv = {Bin("backfilld"), "--data-dir", data_dir_};
    if (!pipelines_dir_.empty()) {
      argv.insert(argv.end(), {"--pipelines", pipelines_dir_});
    }
    argv.insert(argv.end(), {"--listen", address(), "--metrics-listen",
                             absl::StrCat("127.0.0.1:", metrics_port_),
                             "--workers", std::to_string(workers_)});
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
      execv(args[0], args.data());
      _exit(127);
    }
    if (pid_ < 0) return ::testing::AssertionFailure() << "fork failed";
    return ::testing::AssertionSuccess();
  }

  // Spawn() and wait (bounded) until `backfillctl datasets` succeeds
  // against it.
  ::testing::AssertionResult Start() {
    ::testing::AssertionResult spawned = Spawn();
    if (!spawned) return spawned;
    const auto deadline = Clock::now() + seconds(90);
    RunResult last;
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return ::testing::AssertionFailure()
               << "backfilld exited with " << ExitCode(status)
               << " during start-up; log:\n"
               << ReadFile(log_);
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
  int port_ = 0;
  int metrics_port_ = 0;
  pid_t pid_ = -1;
};

// An HTTP/1.0 GET of http://127.0.0.1:port/path; the whole response.
std::string HttpGet(int port, const std::string& path) {
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
bool HasStartupError(const std::string& log, const std::string& text) {
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

// (a) A backfill through the CLI publishes exactly what the transform
// computes from the raw tables; (e) SIGTERM then exits 0.
TEST_F(E2eTest, SubmitWaitPublishesExactlyTheExpectedRows) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/20, /*orders_per_day=*/60, false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  EXPECT_THAT(ReadFile(daemon.log()),
              HasSubstr("backfilld listening on " + daemon.address()));

  RunResult datasets = daemon.CtlJson({"datasets"});
  ASSERT_EQ(datasets.exit_code, 0) << datasets;
  EXPECT_THAT(datasets.out, HasSubstr("\"daily_revenue\""));

  RunResult submit = daemon.CtlJson(
      {"submit", "daily_revenue", "--from", "2025-01-01", "--to", "2025-01-21",
       "--reason", "e2e initial load", "--ticket", "E2E-1", "--wait"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  EXPECT_EQ(JsonString(submit.out, "state"), "BACKFILL_STATE_SUCCEEDED")
      << submit;
  const std::string job = JsonString(submit.out, "id");
  EXPECT_THAT(job, ::testing::MatchesRegex("bf-[0-9]+"));
  EXPECT_EQ(JsonInt(submit.out, "total"), 20) << submit.out;
  EXPECT_EQ(JsonInt(submit.out, "published"), 20) << submit.out;
  EXPECT_EQ(JsonInt(submit.out, "rows_written"), 20 * 4) << submit.out;

  const Rows expected = ExpectedRevenue(warehouse_, "2025-01-01", "2025-01-21");
  ASSERT_EQ(expected.size(), 20u * 4u);  // every region orders every day
  EXPECT_EQ(PublishedRevenue(warehouse_, "0000", "9999"), expected);

  const std::map<std::string, int> lineage = LineageCounts(job);
  EXPECT_EQ(lineage.size(), 20u);
  for (const auto& [partition, n] : lineage) {
    EXPECT_EQ(n, 1) << "lineage rows for " << partition;
  }

  // A second backfill of a sub-range replaces those partitions in place.
  submit = daemon.CtlJson({"submit", "daily_revenue", "--partitions",
                           "2025-01-03,2025-01-05", "--reason", "e2e again",
                           "--wait"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  EXPECT_EQ(JsonInt(submit.out, "total"), 2) << submit.out;
  EXPECT_EQ(PublishedRevenue(warehouse_, "0000", "9999"), expected);

  RunResult status = daemon.Ctl({"status", job});
  EXPECT_EQ(status.exit_code, 0) << status;
  EXPECT_THAT(status.out, HasSubstr(job));

  ExpectCleanSigterm(daemon);
}

// (b) kill -9 while partitions are staged, restart on the same data dir:
// the job resumes, finishes, publishes the expected rows and writes
// lineage exactly once per partition.
TEST_F(E2eTest, RecoversAfterKill9WithoutDoublePublish) {
  constexpr int kDays = 100;
  ASSERT_NO_FATAL_FAILURE(Prepare(kDays, /*orders_per_day=*/200, true));
  Daemon& first = NewDaemon(/*workers=*/1);
  ASSERT_TRUE(first.Start());

  RunResult submit =
      first.CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                     "2025-04-11", "--reason", "e2e crash recovery"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  const std::string job = JsonString(submit.out, "id");
  ASSERT_THAT(job, ::testing::MatchesRegex("bf-[0-9]+")) << submit;

  // Wait until some, not all, partitions are staged.
  const auto deadline = Clock::now() + seconds(120);
  RunResult status;
  int64_t staged = 0;
  while (Clock::now() < deadline) {
    status = first.CtlJson({"status", job}, seconds(30));
    ASSERT_EQ(status.exit_code, 0) << status;
    const std::string state = JsonString(status.out, "state");
    ASSERT_FALSE(IsTerminalState(state))
        << "the job finished before it could be interrupted; make the "
           "workload bigger:\n"
        << status;
    staged = JsonInt(status.out, "staged");
    if (staged >= 2 && staged < kDays) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_GE(staged, 2) << status;
  ASSERT_LT(staged, kDays) << status;

  std::printf("kill -9 backfilld with %lld of %d partitions staged\n",
              static_cast<long long>(staged), kDays);
  first.Signal(SIGKILL);
  std::optional<int> code = first.Wait(seconds(30));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 128 + SIGKILL);

  // Nothing of the job is visible before it publishes.
  {
    Sqlite db(warehouse_, /*read_only=*/true);
    auto rows = db.Query("SELECT COUNT(*) FROM daily_revenue");
    if (rows) {
      EXPECT_EQ((*rows)[0][0], "0") << "partial publication visible";
    }
  }

  Daemon& second = NewDaemon(/*workers=*/2);
  ASSERT_TRUE(second.Start());
  const std::string final_json = WaitTerminal(second, job, seconds(240));
  ASSERT_EQ(JsonString(final_json, "state"), "BACKFILL_STATE_SUCCEEDED")
      << final_json;
  EXPECT_EQ(JsonInt(final_json, "published"), kDays) << final_json;

  const Rows expected = ExpectedRevenue(warehouse_, "2025-01-01", "2025-04-11");
  ASSERT_EQ(expected.size(), static_cast<size_t>(kDays) * 4);
  EXPECT_EQ(PublishedRevenue(warehouse_, "0000", "9999"), expected);

  const std::map<std::string, int> lineage = LineageCounts(job);
  EXPECT_EQ(lineage.size(), static_cast<size_t>(kDays));
  for (const auto& [partition, n] : lineage) {
    EXPECT_EQ(n, 1) << "lineage rows for " << partition;
  }

  ExpectCleanSigterm(second);
}

// (c) Bad requests fail with a non-zero exit code and a one-line error on
// stderr, and create no job.
TEST_F(E2eTest, RejectsBadInputWithoutCreatingJobs) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/5, /*orders_per_day=*/20, false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());

  RunResult before = daemon.CtlJson({"list"});
  ASSERT_EQ(before.exit_code, 0) << before;
  const int jobs_before = CountJobs(before.out);

  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"unknown dataset",
       {"submit", "no_such_dataset", "--from", "2025-01-01", "--to",
        "2025-01-03", "--reason", "e2e"}},
      {"inverted range",
       {"submit", "daily_revenue", "--from", "2025-01-05", "--to", "2025-01-01",
        "--reason", "e2e"}},
      {"malformed partition",
       {"submit", "daily_revenue", "--partitions", "2025-13-45", "--reason",
        "e2e"}},
      {"missing --reason",
       {"submit", "daily_revenue", "--from", "2025-01-01", "--to",
        "2025-01-03"}},
      {"source dataset as target",
       {"submit", "orders", "--from", "2025-01-01", "--to", "2025-01-03",
        "--reason", "e2e"}},
  };
  for (const auto& [what, args] : cases) {
    SCOPED_TRACE(what);
    RunResult r = daemon.Ctl(args, seconds(60));
    EXPECT_NE(r.exit_code, 0) << r;
    EXPECT_FALSE(r.timed_out) << r;
    const std::string err(absl::StripAsciiWhitespace(r.err));
    EXPECT_FALSE(err.empty()) << r;
    EXPECT_EQ(err.find('\n'), std::string::npos)
        << "expected a one-line error:\n"
        << r;
  }

  RunResult after = daemon.CtlJson({"list"});
  ASSERT_EQ(after.exit_code, 0) << after;
  EXPECT_EQ(CountJobs(after.out), jobs_before) << after.out;

  ExpectCleanSigterm(daemon);
}

// (d) /metrics serves backfill_ metrics in a format promtool accepts.
TEST_F(E2eTest, MetricsPassPromtoolLint) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/20, false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  RunResult submit =
      daemon.CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                      "2025-01-04", "--reason", "e2e metrics", "--wait"});
  ASSERT_EQ(submit.exit_code, 0) << submit;

  const std::string response = HttpGet(daemon.metrics_port(), "/metrics");
  ASSERT_THAT(response, ::testing::StartsWith("HTTP/1."));
  const size_t header_end = response.find("\r\n\r\n");
  ASSERT_NE(header_end, std::string::npos) << response;
  EXPECT_THAT(response.substr(0, response.find("\r\n")), HasSubstr(" 200"));
  const std::string body = response.substr(header_end + 4);
  EXPECT_THAT(body, HasSubstr("backfill_"));

  const std::string promtool = "/usr/bin/promtool";
  if (fs::exists(promtool)) {
    const std::string scrape = root_ + "/metrics.txt";
    WriteFile(scrape, body);
    RunResult lint =
        RunProcess({promtool, "check", "metrics"}, root_, seconds(60), scrape);
    EXPECT_EQ(lint.exit_code, 0) << lint;
    EXPECT_EQ(lint.out + lint.err, "") << lint;
  }

  ExpectCleanSigterm(daemon);
}

// (e) SIGTERM while a job runs: the daemon drains and exits 0, and the job
// completes (after a restart if the drain stopped it).
TEST_F(E2eTest, SigtermWhileRunningExitsZeroAndJobCompletes) {
  constexpr int kDays = 40;
  ASSERT_NO_FATAL_FAILURE(Prepare(kDays, /*orders_per_day=*/50, true));
  Daemon& first = NewDaemon(/*workers=*/1);
  ASSERT_TRUE(first.Start());
  RunResult submit =
      first.CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                     "2025-02-10", "--reason", "e2e sigterm"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  const std::string job = JsonString(submit.out, "id");
  ASSERT_FALSE(job.empty()) << submit;
  std::this_thread::sleep_for(milliseconds(500));
  ASSERT_NO_FATAL_FAILURE(ExpectCleanSigterm(first));

  Daemon& second = NewDaemon();
  ASSERT_TRUE(second.Start());
  const std::string final_json = WaitTerminal(second, job, seconds(240));
  ASSERT_EQ(JsonString(final_json, "state"), "BACKFILL_STATE_SUCCEEDED")
      << final_json;
  EXPECT_EQ(PublishedRevenue(warehouse_, "0000", "9999"),
            ExpectedRevenue(warehouse_, "2025-01-01", "2025-02-10"));
  ExpectCleanSigterm(second);
}

// Global flags go after the subcommand too.
TEST_F(E2eTest, GlobalFlagsAfterTheSubcommand) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/20, false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());

  RunResult datasets =
      RawCtl({"datasets", "--server", daemon.address(), "--json"});
  ASSERT_EQ(datasets.exit_code, 0) << datasets;
  EXPECT_THAT(datasets.out, ::testing::StartsWith("{")) << datasets;
  EXPECT_THAT(datasets.out, HasSubstr("\"daily_revenue\"")) << datasets;

  RunResult submit =
      daemon.CtlJson({"submit", "daily_revenue", "--from", "2025-01-01", "--to",
                      "2025-01-03", "--reason", "e2e global flags", "--wait"});
  ASSERT_EQ(submit.exit_code, 0) << submit;
  const std::string job = JsonString(submit.out, "id");
  ASSERT_THAT(job, ::testing::MatchesRegex("bf-[0-9]+")) << submit;

  RunResult status =
      RawCtl({"status", job, "--json", "--server", daemon.address()});
  ASSERT_EQ(status.exit_code, 0) << status;
  EXPECT_THAT(status.out, ::testing::StartsWith("{")) << status;
  EXPECT_EQ(JsonString(status.out, "id"), job) << status;
  EXPECT_EQ(JsonString(status.out, "state"), "BACKFILL_STATE_SUCCEEDED")
      << status;

  // --timeout after the subcommand as well.
  RunResult list = RawCtl(
      {"list", "--json", "--timeout", "20", "--server", daemon.address()});
  ASSERT_EQ(list.exit_code, 0) << list;
  EXPECT_EQ(CountJobs(list.out), 1) << list;

  ExpectCleanSigterm(daemon);
}

// BACKFILL_SERVER is the address when --server is absent; --server wins
// over it.
TEST_F(E2eTest, ServerFromEnvironmentAndFlagOverridesIt) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/20, false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());
  const std::string dead = absl::StrCat("127.0.0.1:", FreePort());

  RunResult from_env =
      RawCtl({"datasets", "--json"}, {"BACKFILL_SERVER=" + daemon.address()});
  ASSERT_EQ(from_env.exit_code, 0) << from_env;
  EXPECT_THAT(from_env.out, HasSubstr("\"daily_revenue\"")) << from_env;

  // The variable really is used: pointed at a dead port, the call fails
  // and names that address.
  RunResult dead_env =
      RawCtl({"datasets", "--timeout", "10"}, {"BACKFILL_SERVER=" + dead});
  EXPECT_EQ(dead_env.exit_code, 1) << dead_env;
  EXPECT_THAT(dead_env.err, HasSubstr(dead)) << dead_env;

  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--server", daemon.address(), "datasets",
                                 "--json"},
        std::vector<std::string>{"datasets", "--json", "--server",
                                 daemon.address()}}) {
    RunResult overridden = RawCtl(args, {"BACKFILL_SERVER=" + dead});
    ASSERT_EQ(overridden.exit_code, 0) << overridden;
    EXPECT_THAT(overridden.out, HasSubstr("\"daily_revenue\"")) << overridden;
  }

  ExpectCleanSigterm(daemon);
}

// `submit` without a reason is a usage error (exit 2), says so in one line
// on stderr and never reaches the server.
TEST_F(E2eTest, SubmitWithoutReasonExitsTwoAndCreatesNoJob) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/20, false));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());

  for (const std::vector<std::string>& reason :
       {std::vector<std::string>{}, std::vector<std::string>{"--reason", ""},
        std::vector<std::string>{"--reason", "   "}}) {
    std::vector<std::string> args = {"submit", "daily_revenue",
                                     "--from", "2025-01-01",
                                     "--to",   "2025-01-03"};
    args.insert(args.end(), reason.begin(), reason.end());
    RunResult r = daemon.Ctl(args, seconds(60));
    SCOPED_TRACE(r.command);
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_EQ(r.out, "") << r;
    const std::string err(absl::StripTrailingAsciiWhitespace(r.err));
    EXPECT_THAT(err, HasSubstr("--reason")) << r;
    EXPECT_EQ(err.find('\n'), std::string::npos)
        << "expected a one-line error:\n"
        << r;
  }

  RunResult list = daemon.CtlJson({"list"});
  ASSERT_EQ(list.exit_code, 0) << list;
  EXPECT_EQ(CountJobs(list.out), 0) << list.out;

  ExpectCleanSigterm(daemon);
}

// `submit --wait` exits 1 when the job ends in another state than
// SUCCEEDED: a transform that emits rows outside its partition fails the
// job, and nothing of it is published.
TEST_F(E2eTest, SubmitWaitExitsOneWhenTheJobFails) {
  ASSERT_NO_FATAL_FAILURE(WriteWarehouse(warehouse_, /*days=*/3, 20));
  ASSERT_NO_FATAL_FAILURE(WriteFile(
      pipelines_dir_ + "/e2e.yaml",
      PipelineYaml(false,
                   fixtures::OutOfPartitionDatasetYaml("misdated_counts"))));
  Daemon& daemon = NewDaemon();
  ASSERT_TRUE(daemon.Start());

  RunResult submit = daemon.CtlJson(
      {"submit", "misdated_counts", "--from", "2025-01-01", "--to",
       "2025-01-03", "--reason", "e2e failing transform", "--wait"},
      seconds(180));
  EXPECT_EQ(submit.exit_code, 1) << submit;
  EXPECT_FALSE(submit.timed_out) << submit;
  EXPECT_EQ(JsonString(submit.out, "state"), "BACKFILL_STATE_FAILED") << submit;
  const std::string job = JsonString(submit.out, "id");
  ASSERT_THAT(job, ::testing::MatchesRegex("bf-[0-9]+")) << submit;
  EXPECT_THAT(submit.err, HasSubstr(job)) << submit;

  // Nothing published: the table is absent (never created) or empty.
  Sqlite db(warehouse_, /*read_only=*/true);
  auto rows = db.Query(
      "SELECT COUNT(*) FROM sqlite_master WHERE name = 'misdated_counts'");
  ASSERT_TRUE(rows.has_value()) << db.error();
  if ((*rows)[0][0] != "0") {
    auto published = db.Query("SELECT COUNT(*) FROM misdated_counts");
    ASSERT_TRUE(published.has_value()) << db.error();
    EXPECT_EQ((*published)[0][0], "0") << "rows of a FAILED job published";
  }

  ExpectCleanSigterm(daemon);
}

// Without --pipelines, a data dir without pipelines/ starts with no
// datasets; an explicit --pipelines that does not exist is an error
// (exit 2) before anything starts.
TEST_F(E2eTest, PipelinesDefaultAndMissingExplicitDirectory) {
  Daemon& bare = NewDaemonIn(root_ + "/bare", "");
  ASSERT_TRUE(bare.Start());
  EXPECT_THAT(ReadFile(bare.log()), HasSubstr("no --pipelines given"));
  RunResult datasets = bare.Ctl({"datasets"});
  EXPECT_EQ(datasets.exit_code, 0) << datasets;
  ExpectCleanSigterm(bare);

  Daemon& missing = NewDaemonIn(root_ + "/missing", root_ + "/no-such-dir");
  std::optional<int> code = missing.SpawnExpectingExit(seconds(60));
  ASSERT_TRUE(code.has_value())
      << "backfilld started with a missing --pipelines directory; log:\n"
      << ReadFile(missing.log());
  EXPECT_EQ(*code, 2) << ReadFile(missing.log());
  EXPECT_TRUE(HasStartupError(ReadFile(missing.log()), "does not exist"))
      << ReadFile(missing.log());
}

// Health is not probed here: e2e_tests links no gRPC (there is no
// grpc_health_probe either); tests/server_service_test.cc covers
// grpc.health.v1.Health/Check on the service.

// A second backfilld on the same --data-dir refuses to start (the data dir
// is locked): exit 1, a line saying it is in use, and the first daemon
// keeps serving.
TEST_F(E2eTest, SecondDaemonOnTheSameDataDirRefusesToStart) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/20, false));
  Daemon& first = NewDaemon();
  ASSERT_TRUE(first.Start());

  Daemon& second = NewDaemon();
  std::optional<int> code = second.SpawnExpectingExit(seconds(60));
  ASSERT_TRUE(code.has_value())
      << "a second backfilld started on the same --data-dir; log:\n"
      << ReadFile(second.log());
  EXPECT_EQ(*code, 1) << ReadFile(second.log());
  EXPECT_TRUE(HasStartupError(ReadFile(second.log()), "in use"))
      << ReadFile(second.log());

  RunResult datasets = first.CtlJson({"datasets"});
  EXPECT_EQ(datasets.exit_code, 0) << datasets;
  ExpectCleanSigterm(first);
}

// A second backfilld on another data dir but the same --listen address
// fails to start (no port sharing): exit 1 and a message naming the
// address; the first daemon keeps serving.
TEST_F(E2eTest, SecondDaemonOnTheSameListenAddressFailsToStart) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/20, false));
  Daemon& first = NewDaemon();
  ASSERT_TRUE(first.Start());

  Daemon& second = NewDaemonIn(root_ + "/other-data", "");
  second.set_listen_port(first.port());
  std::optional<int> code = second.SpawnExpectingExit(seconds(60));
  ASSERT_TRUE(code.has_value())
      << "a second backfilld started on " << first.address() << "; log:\n"
      << ReadFile(second.log());
  EXPECT_EQ(*code, 1) << ReadFile(second.log());
  EXPECT_TRUE(HasStartupError(ReadFile(second.log()), first.address()))
      << ReadFile(second.log());

  RunResult datasets = first.CtlJson({"datasets"});
  ASSERT_EQ(datasets.exit_code, 0) << datasets;
  EXPECT_THAT(datasets.out, HasSubstr("\"daily_revenue\"")) << datasets;
  ExpectCleanSigterm(first);
}

}  // namespace
}  // namespace backfill
