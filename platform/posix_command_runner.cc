#include "platform/posix_command_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace backfill {
namespace {

constexpr size_t kMaxErrorOutput = 4096;

// What a program inherits of the daemon's environment; nothing else.
constexpr const char* kKeptEnvironment[] = {"PATH", "LANG", "HOME"};

// Closes a descriptor once.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Close(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int* out() { return &fd_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

std::string Errno(int err) { return strerror(err); }

// Appends what `fd` has to `out`, keeping at most `limit` bytes. False at
// end of file (or an error: the pipe is done either way).
bool Drain(int fd, std::string* out, size_t limit, bool* truncated) {
  char buffer[8192];
  const ssize_t n = read(fd, buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  const size_t room = out->size() < limit ? limit - out->size() : 0;
  const size_t keep = std::min(room, static_cast<size_t>(n));
  out->append(buffer, keep);
  if (keep < static_cast<size_t>(n)) *truncated = true;
  return true;
}

}  // namespace

absl::StatusOr<CommandResult> PosixCommandRunner::Run(
    const CommandRequest& request) {
  if (request.argv.empty() || request.argv[0].empty()) {
    return absl::InvalidArgumentError("a command needs a program to run");
  }
  const std::string shown = absl::StrJoin(request.argv, " ");
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", Errno(errno)));
  }
  Fd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", Errno(errno)));
  }
  Fd err_read(err_pipe[0]), err_write(err_pipe[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_write.get(), STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so that a timeout kills what it started too;
  // default signal handling and no blocked signals, whatever this process
  // has.
  sigset_t none;
  sigemptyset(&none);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
                                      POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
  // No descriptor of the daemon beyond 0-2 reaches the program, whether or
  // not it is close-on-exec (the state store, the warehouse, sockets).
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  // A minimal environment: the daemon's secrets (tokens for consumer
  // headers, cloud credentials) are not the program's business.
  std::vector<std::string> env_strings;
  for (const char* name : kKeptEnvironment) {
    if (const char* v = getenv(name); v != nullptr) {
      env_strings.push_back(absl::StrCat(name, "=", v));
    }
  }
  std::vector<char*> env;
  for (std::string& e : env_strings) env.push_back(e.data());
  env.push_back(nullptr);
  std::vector<char*> argv;
  argv.reserve(request.argv.size() + 1);
  for (const std::string& arg : request.argv) {
    argv.push_back(const_cast<char*>(arg.c_str()));
  }
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned =
      posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (spawned != 0) {
    if (spawned == ENOENT || spawned == EACCES || spawned == ENOTDIR) {
      return absl::NotFoundError(
          absl::StrCat("cannot run ", request.argv[0], ": ", Errno(spawned)));
    }
    return absl::InternalError(
        absl::StrCat("cannot run ", request.argv[0], ": ", Errno(spawned)));
  }
  out_write.Close();
  err_write.Close();

  CommandResult result;
  bool err_truncated = false;
  const absl::Time deadline = absl::Now() + request.timeout;
  bool out_open = true;
  bool err_open = true;
  bool timed_out = false;
  while (out_open || err_open) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out_read.get() : -1, POLLIN, 0},
                     {err_open ? err_read.get() : -1, POLLIN, 0}};
    const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(left));
    const int ready =
        poll(fds, 2, static_cast<int>(std::min<int64_t>(ms, 60 * 1000)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return absl::InternalError(absl::StrCat("poll: ", Errno(errno)));
    }
    if (out_open && fds[0].revents != 0) {
      out_open = Drain(out_read.get(), &result.output, request.max_output_bytes,
                       &result.output_truncated);
    }
    if (err_open && fds[1].revents != 0) {
      err_open = Drain(err_read.get(), &result.error_output, kMaxErrorOutput,
                       &err_truncated);
    }
  }
  // Both pipes are closed: the program (and whatever inherited them) is
  // done writing. It may still be running; wait for it within the deadline.
  int status = 0;
  while (!timed_out) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("waitpid: ", Errno(errno)));
    }
    if (absl::Now() >= deadline) {
      timed_out = true;
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (timed_out) {
    kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return absl::DeadlineExceededError(
        absl::StrCat("`", shown, "` did not finish within ",
                     absl::FormatDuration(
                         absl::Trunc(request.timeout, absl::Milliseconds(1))),
                     "; it was killed"));
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace backfill
