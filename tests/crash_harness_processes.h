// The processes and options of the crash harness (crash_harness.cc): the
// daemons of a trial (started, tracked so that a harness told to stop kills
// them, and waited for), what a run of one ended with, and the command
// line.
//
// The tracked pids are written by the harness's thread and read by its
// signal handler (sig_atomic_t); the rest is used by that thread only.

#ifndef BACKFILL_TESTS_CRASH_HARNESS_PROCESSES_H_
#define BACKFILL_TESTS_CRASH_HARNESS_PROCESSES_H_

#include "tests/crash_harness_model.h"
#include "tests/testing/executable_dir.h"
#include "tests/testing/harness_processes.h"

namespace backfill::crash {

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

// --- Processes ---------------------------------------------------------------

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
inline Outcome WaitDeathOrEnd(TrialDaemon& d, const std::string& job,
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

// --- Options -----------------------------------------------------------------

struct Options {
  int trials = 3;
  std::vector<std::string> points;
  uint64_t seed = 0;
  int workers = 2;
  bool keep = false;
  std::string bin_dir = ::backfill::testing::ExecutableDir();
};

inline constexpr char kUsage[] =
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

inline std::string AllPoints() {
  std::vector<std::string> names;
  for (const char* p : kCrashPoints) names.push_back(p);
  return absl::StrJoin(names, ",");
}

inline int PointIndex(const std::string& name) {
  for (size_t i = 0; i < std::size(kCrashPoints); ++i) {
    if (name == kCrashPoints[i]) return static_cast<int>(i);
  }
  return -1;
}

// Parses the flags; exits 2 on a usage error, 0 after --help.
inline Options ParseFlags(int argc, char** argv) {
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

}  // namespace backfill::crash

#endif  // BACKFILL_TESTS_CRASH_HARNESS_PROCESSES_H_
