#include "tests/testing/postgres_test_server.h"

#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "libpq-fe.h"

namespace backfill::testing {
namespace {

namespace fs = std::filesystem;

struct Account {
  uid_t uid;
  gid_t gid;
};

// The account the server programs run as: `postgres` when this process is
// root (PostgreSQL refuses root), else this process's own (nullopt).
absl::StatusOr<std::optional<Account>> ServerAccount() {
  if (geteuid() != 0) return std::optional<Account>();
  const passwd* pw = getpwnam("postgres");
  if (pw == nullptr) {
    return absl::FailedPreconditionError(
        "running as root, and there is no system user 'postgres' to run "
        "PostgreSQL as (install postgresql-15: scripts/install-deps.sh)");
  }
  return std::optional<Account>(Account{pw->pw_uid, pw->pw_gid});
}

bool IsExecutable(const std::string& path) {
  return access(path.c_str(), X_OK) == 0;
}

// The directory of initdb, pg_ctl and postgres.
absl::StatusOr<std::string> BinDir() {
  if (const char* env = getenv("BACKFILL_PG_BIN_DIR");
      env != nullptr && *env != '\0') {
    if (!IsExecutable(absl::StrCat(env, "/initdb"))) {
      return absl::FailedPreconditionError(absl::StrCat(
          "BACKFILL_PG_BIN_DIR is ", env, ", which holds no initdb"));
    }
    return std::string(env);
  }
  std::string dir;
  if (FILE* p = popen("pg_config --bindir 2>/dev/null", "r"); p != nullptr) {
    char buf[4096];
    while (fgets(buf, sizeof buf, p) != nullptr) dir += buf;
    pclose(p);
  }
  dir = std::string(absl::StripAsciiWhitespace(dir));
  for (const std::string& candidate :
       {dir, std::string("/usr/lib/postgresql/15/bin")}) {
    if (!candidate.empty() && IsExecutable(candidate + "/initdb") &&
        IsExecutable(candidate + "/pg_ctl")) {
      return candidate;
    }
  }
  return absl::FailedPreconditionError(
      "PostgreSQL's server programs (initdb, pg_ctl) were not found: install "
      "postgresql-15 (scripts/install-deps.sh), or name their directory in "
      "BACKFILL_PG_BIN_DIR");
}

// Runs `argv` (no shell) as `account` when given, its stdout and stderr
// appended to `log`; returns its exit status.
absl::StatusOr<int> Run(const std::vector<std::string>& argv,
                        const std::string& log,
                        const std::optional<Account>& account) {
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // The account first, so that the logs it creates are its own.
    if (account.has_value() &&
        (setgroups(0, nullptr) != 0 || setgid(account->gid) != 0 ||
         setuid(account->uid) != 0)) {
      _exit(126);
    }
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("waitpid: ", std::strerror(errno)));
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// A TCP port on 127.0.0.1 that was free a moment ago.
absl::StatusOr<int> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string error = std::strerror(errno);
    close(fd);
    return absl::InternalError(absl::StrCat("bind: ", error));
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::string Tail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.size() > max_bytes) text = text.substr(text.size() - max_bytes);
  return text;
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Runs `sql` as the superuser on `dsn`; its error, if any.
absl::Status Exec(const std::string& dsn, const std::string& sql) {
  PGconn* conn = PQconnectdb(dsn.c_str());
  absl::Status status;
  if (PQstatus(conn) != CONNECTION_OK) {
    status = absl::UnavailableError(
        absl::StrCat("connecting to ", dsn, ": ", PQerrorMessage(conn)));
  } else {
    PGresult* r = PQexec(conn, sql.c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      status =
          absl::InternalError(absl::StrCat(sql, ": ", PQresultErrorMessage(r)));
    }
    PQclear(r);
  }
  PQfinish(conn);
  return status;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresTestServer>>
PostgresTestServer::StartOrShare() {
  const char* env = getenv("BACKFILL_TEST_PG_DIR");
  if (env == nullptr || *env == '\0') return Start();
  const std::string dir = env;
  int port = 0;
  if (!absl::SimpleAtoi(ReadFirstLine(dir + "/port"), &port) || port <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "BACKFILL_TEST_PG_DIR is ", dir,
        ", which holds no port file: the shared server is not running (ctest "
        "starts it with the test postgres.start)"));
  }
  std::unique_ptr<PostgresTestServer> server(
      new PostgresTestServer("", dir, port));
  server->shared_ = true;
  static int next = 0;
  const std::string database = absl::StrCat("test_", getpid(), "_", ++next);
  if (absl::Status s = Exec(server->Dsn("postgres"),
                            absl::StrCat("CREATE DATABASE ", database));
      !s.ok()) {
    return s;
  }
  server->database_ = database;
  return server;
}

absl::StatusOr<std::unique_ptr<PostgresTestServer>>
PostgresTestServer::Start() {
  absl::StatusOr<std::string> bin = BinDir();
  if (!bin.ok()) return bin.status();
  absl::StatusOr<std::optional<Account>> account = ServerAccount();
  if (!account.ok()) return account.status();

  // Under /tmp rather than the test's TEMP dir: the `postgres` account must
  // reach it, and the socket's path must stay short.
  std::string tmpl = "/tmp/backfill_pg_XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
  }
  const std::string dir = tmpl;
  if (account->has_value() &&
      chown(dir.c_str(), (*account)->uid, (*account)->gid) != 0) {
    const std::string error = std::strerror(errno);
    fs::remove_all(dir);
    return absl::InternalError(absl::StrCat("chown ", dir, ": ", error));
  }
  // Owned from here on: the destructor removes the directory.
  std::unique_ptr<PostgresTestServer> server(
      new PostgresTestServer(*bin, dir, 0));
  const std::string log = dir + "/server.log";
  const std::string data = dir + "/data";

  absl::StatusOr<int> initdb =
      Run({*bin + "/initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E",
           "UTF8", "--locale=C", "--no-sync"},
          dir + "/initdb.log", *account);
  if (!initdb.ok()) return initdb.status();
  if (*initdb != 0) {
    return absl::InternalError(absl::StrCat("initdb exited with status ",
                                            *initdb, ":\n",
                                            Tail(dir + "/initdb.log", 4000)));
  }
  // A port taken between FreePort and the server's bind fails the start:
  // try a few.
  for (int attempt = 0; attempt < 5; ++attempt) {
    absl::StatusOr<int> port = FreePort();
    if (!port.ok()) return port.status();
    const std::string options =
        absl::StrCat("-p ", *port, " -k ", dir,
                     " -c listen_addresses=127.0.0.1 -c fsync=off"
                     " -c synchronous_commit=off -c full_page_writes=off");
    absl::StatusOr<int> started =
        Run({*bin + "/pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "-o",
             options, "start"},
            dir + "/pg_ctl.log", *account);
    if (!started.ok()) return started.status();
    if (*started == 0) {
      server->port_ = *port;
      server->options_ = options;
      server->running_ = true;
      return server;
    }
  }
  return absl::InternalError(absl::StrCat(
      "pg_ctl start failed 5 times; the server's log ends:\n",
      server->LogTail(), "\npg_ctl said:\n", Tail(dir + "/pg_ctl.log", 2000)));
}

PostgresTestServer::~PostgresTestServer() {
  if (shared_) {
    // The server is the run's: only the database is this object's.
    Exec(Dsn("postgres"),
         absl::StrCat("DROP DATABASE IF EXISTS ", database_, " WITH (FORCE)"))
        .IgnoreError();
    return;
  }
  if (running_) {
    absl::StatusOr<std::optional<Account>> account = ServerAccount();
    if (account.ok()) {
      Run({bin_dir_ + "/pg_ctl", "-D", dir_ + "/data", "-m", "fast", "-w", "-t",
           "60", "stop"},
          dir_ + "/pg_ctl.log", *account)
          .IgnoreError();
    }
  }
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

absl::StatusOr<std::string> PostgresTestServer::CreateDatabase(
    const std::string& suffix, bool c_collation) const {
  const std::string name = absl::StrCat(database_, "_", suffix);
  if (absl::Status dropped = DropDatabase(name); !dropped.ok()) return dropped;
  if (absl::Status made =
          Exec(Dsn("postgres"),
               absl::StrCat("CREATE DATABASE ", name,
                            c_collation ? " TEMPLATE template0 ENCODING 'UTF8' "
                                          "LC_COLLATE 'C' LC_CTYPE 'C'"
                                        : ""));
      !made.ok()) {
    return made;
  }
  return name;
}

absl::Status PostgresTestServer::DropDatabase(const std::string& name) const {
  return Exec(Dsn("postgres"),
              absl::StrCat("DROP DATABASE IF EXISTS ", name, " WITH (FORCE)"));
}

absl::Status PostgresTestServer::Restart() {
  if (shared_) {
    return absl::FailedPreconditionError(
        "the shared server is not this test's to restart: use Start()");
  }
  if (!running_)
    return absl::FailedPreconditionError("the server is not running");
  absl::StatusOr<std::optional<Account>> account = ServerAccount();
  if (!account.ok()) return account.status();
  const std::string data = dir_ + "/data";
  absl::StatusOr<int> restarted =
      Run({bin_dir_ + "/pg_ctl", "-D", data, "-l", dir_ + "/server.log", "-m",
           "fast", "-w", "-t", "60", "-o", options_, "restart"},
          dir_ + "/pg_ctl.log", *account);
  if (!restarted.ok()) return restarted.status();
  if (*restarted != 0) {
    // running_ stays set: the destructor's stop is harmless if it is down.
    return absl::InternalError(
        absl::StrCat("pg_ctl restart exited with status ", *restarted,
                     "; the server's log ends:\n", LogTail(),
                     "\npg_ctl said:\n", Tail(dir_ + "/pg_ctl.log", 2000)));
  }
  return absl::OkStatus();
}

std::string PostgresTestServer::Dsn(const std::string& database) const {
  return absl::StrCat("host=127.0.0.1 port=", port_,
                      " dbname=", database.empty() ? database_ : database,
                      " user=postgres");
}

std::string PostgresTestServer::LogTail() const {
  return Tail(dir_ + "/server.log", 4000);
}

}  // namespace backfill::testing
