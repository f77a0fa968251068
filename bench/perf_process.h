// Child processes of the performance suite: a command run to its end with
// its CPU time (wait4's rusage), and a long-running process (the daemon)
// whose CPU time and peak memory are read from /proc while it runs.
//
// A ChildProcess owns its process: the destructor kills it (SIGKILL) and
// reaps it if it still runs, and every child is killed by the kernel when
// the suite's process ends without that (PR_SET_PDEATHSIG). Not
// thread-safe; one thread drives each.

#ifndef BACKFILL_BENCH_PERF_PROCESS_H_
#define BACKFILL_BENCH_PERF_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace backfill::bench {

// What a finished command used.
struct CommandUsage {
  int exit_code = -1;       // 128 + signal when killed
  double wall_seconds = 0;  // start to exit
  double cpu_seconds = 0;   // user + system
  int64_t peak_rss_kb = 0;  // ru_maxrss
};

// Runs argv[0] (found on PATH when it has no '/') with stdin from
// `stdin_path` ("" for /dev/null) and stdout and stderr appended to
// `log_path`, and waits for it. An error only when it cannot be started;
// a non-zero exit is in the usage.
absl::StatusOr<CommandUsage> RunCommand(const std::vector<std::string>& argv,
                                        const std::string& stdin_path,
                                        const std::string& log_path);

// CPU time (user + system) and the peak resident set of a running process,
// from /proc/<pid>/stat and /proc/<pid>/status.
struct ProcessSample {
  double cpu_seconds = 0;
  int64_t peak_rss_kb = 0;  // VmHWM
  int64_t rss_kb = 0;       // VmRSS
};
absl::StatusOr<ProcessSample> SampleProcess(pid_t pid);

class ChildProcess {
 public:
  // Starts argv with stdout and stderr appended to `log_path`.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      const std::vector<std::string>& argv, const std::string& log_path);
  ~ChildProcess();

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  absl::Time started() const { return started_; }
  bool running() const { return pid_ > 0; }

  absl::StatusOr<ProcessSample> Sample() const { return SampleProcess(pid_); }

  // Sends SIGTERM and waits up to `timeout` for the exit, then SIGKILL.
  // Returns the exit code.
  int Stop(absl::Duration timeout);
  // SIGKILL, then reaps it.
  void Kill();

 private:
  ChildProcess(pid_t pid, absl::Time started) : pid_(pid), started_(started) {}
  int Reap();

  pid_t pid_;
  absl::Time started_;
};

// A TCP port on 127.0.0.1 nobody listens on right now.
int FreePort();

// The CPU time (user + system) of process `root` and of its children,
// running or ended (a PostgreSQL server's postmaster and its backends), in
// seconds, from /proc.
double ProcessTreeCpuSeconds(pid_t root);

}  // namespace backfill::bench

#endif  // BACKFILL_BENCH_PERF_PROCESS_H_
