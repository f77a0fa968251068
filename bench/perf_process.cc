#include "bench/perf_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace backfill::bench {
namespace {

namespace fs = std::filesystem;

// Fields of /proc/<pid>/stat after the command name (fields[0] is field 3).
std::vector<std::string> StatFields(const std::string& pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  const size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 > stat.size()) {
    return {};
  }
  return absl::StrSplit(stat.substr(close_paren + 2), ' ');
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// fork + exec with the given stdin and log; returns the child's pid.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv,
                            const std::string& stdin_path,
                            const std::string& log_path) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int in = open(stdin_path.empty() ? "/dev/null" : stdin_path.c_str(),
                      O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot open ", stdin_path, ": ", std::strerror(errno)));
  }
  const int out =
      open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) {
    close(in);
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open ", log_path, ": ", std::strerror(errno)));
  }
  const pid_t pid = fork();
  if (pid == 0) {
    // Dies with the suite: a suite killed (a timeout, Ctrl-C) leaves no
    // daemon behind. The suite forks from its main thread only, whose end
    // is the process's.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(in, 0);
    dup2(out, 1);
    dup2(out, 2);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(in);
  close(out);
  if (pid < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("fork: ", std::strerror(errno)));
  }
  return pid;
}

double Seconds(const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; }

}  // namespace

absl::StatusOr<CommandUsage> RunCommand(const std::vector<std::string>& argv,
                                        const std::string& stdin_path,
                                        const std::string& log_path) {
  const absl::Time start = absl::Now();
  absl::StatusOr<pid_t> pid = Spawn(argv, stdin_path, log_path);
  if (!pid.ok()) return pid.status();
  int status = 0;
  rusage usage{};
  while (wait4(*pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(absl::StrCat("wait4: ", std::strerror(errno)));
    }
  }
  CommandUsage result;
  result.exit_code = ExitCodeOf(status);
  result.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  result.cpu_seconds = Seconds(usage.ru_utime) + Seconds(usage.ru_stime);
  result.peak_rss_kb = usage.ru_maxrss;
  return result;
}

absl::StatusOr<ProcessSample> SampleProcess(pid_t pid) {
  std::ifstream stat_file(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(stat_file)),
                   std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces: fields count from the last
  // ')'. utime and stime are fields 14 and 15, in clock ticks.
  const size_t close_paren = stat.rfind(')');
  if (stat.empty() || close_paren == std::string::npos) {
    return absl::NotFoundError(absl::StrCat("no process ", pid));
  }
  std::vector<std::string> fields =
      absl::StrSplit(stat.substr(close_paren + 2), ' ');
  // fields[0] is field 3 (state): utime is fields[11], stime fields[12].
  int64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return absl::InternalError(absl::StrCat("unreadable /proc/", pid, "/stat"));
  }
  ProcessSample sample;
  sample.cpu_seconds =
      static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
  std::ifstream status_file(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status_file, line)) {
    std::vector<std::string> parts =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipWhitespace());
    if (parts.size() < 2) continue;
    if (parts[0] == "VmHWM:") absl::SimpleAtoi(parts[1], &sample.peak_rss_kb);
    if (parts[0] == "VmRSS:") absl::SimpleAtoi(parts[1], &sample.rss_kb);
  }
  return sample;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, const std::string& log_path) {
  const absl::Time start = absl::Now();
  absl::StatusOr<pid_t> pid = Spawn(argv, "", log_path);
  if (!pid.ok()) return pid.status();
  return std::unique_ptr<ChildProcess>(new ChildProcess(*pid, start));
}

ChildProcess::~ChildProcess() {
  if (running()) Kill();
}

int ChildProcess::Reap() {
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return ExitCodeOf(status);
}

int ChildProcess::Stop(absl::Duration timeout) {
  if (!running()) return -1;
  kill(pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      return ExitCodeOf(status);
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  kill(pid_, SIGKILL);
  return Reap();
}

void ChildProcess::Kill() {
  if (!running()) return;
  kill(pid_, SIGKILL);
  Reap();
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
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

double ProcessTreeCpuSeconds(pid_t root) {
  auto ticks = [](const std::vector<std::string>& f, size_t from, size_t to) {
    int64_t sum = 0;
    for (size_t i = from; i <= to && i < f.size(); ++i) {
      int64_t v = 0;
      if (absl::SimpleAtoi(f[i], &v)) sum += v;
    }
    return sum;
  };
  // utime, stime, cutime, cstime: fields 14-17.
  int64_t total = ticks(StatFields(absl::StrCat(root)), 11, 14);
  std::error_code error;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc", error)) {
    const std::string pid = e.path().filename().string();
    int64_t ignored = 0;
    if (!absl::SimpleAtoi(pid, &ignored)) continue;
    const std::vector<std::string> f = StatFields(pid);
    if (f.size() > 14 && f[1] == absl::StrCat(root)) total += ticks(f, 11, 14);
  }
  return static_cast<double>(total) / sysconf(_SC_CLK_TCK);
}

}  // namespace backfill::bench
