// What the crash and failover harnesses share about the daemons they
// start: the processes alive now, killed with SIGKILL when the harness
// itself is told to stop (OnStopSignal, installed for SIGINT and SIGTERM),
// whether a child exited without reaping it, and the end of a log.
//
// Process-wide state (`tracked`), written only by the harness's own thread
// and read by its signal handler (sig_atomic_t slots).

#ifndef BACKFILL_TESTS_TESTING_HARNESS_PROCESSES_H_
#define BACKFILL_TESTS_TESTING_HARNESS_PROCESSES_H_

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/testing/e2e_support.h"

namespace backfill::harness {

inline constexpr int kMaxTracked = 16;
inline volatile sig_atomic_t tracked[kMaxTracked] = {};

inline void Track(pid_t pid) {
  for (int i = 0; i < kMaxTracked; ++i) {
    if (tracked[i] == 0) {
      tracked[i] = pid;
      return;
    }
  }
}

inline void Untrack(pid_t pid) {
  for (int i = 0; i < kMaxTracked; ++i) {
    if (tracked[i] == pid) tracked[i] = 0;
  }
}

inline void OnStopSignal(int sig) {
  for (int i = 0; i < kMaxTracked; ++i) {
    if (tracked[i] > 0) kill(static_cast<pid_t>(tracked[i]), SIGKILL);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

// Whether `pid` (a child not yet reaped) has exited, without reaping it.
inline bool HasExited(pid_t pid) {
  if (pid <= 0) return true;
  const std::string stat = e2e::ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return true;
  const char state = stat[paren + 2];
  return state == 'Z' || state == 'X';
}

// The last `lines` lines of `text`.
inline std::string Tail(const std::string& text, int lines) {
  std::vector<std::string> all = absl::StrSplit(text, '\n');
  while (!all.empty() && all.back().empty()) all.pop_back();
  const size_t from = all.size() > static_cast<size_t>(lines)
                          ? all.size() - static_cast<size_t>(lines)
                          : 0;
  return absl::StrJoin(all.begin() + static_cast<long>(from), all.end(), "\n");
}

}  // namespace backfill::harness

#endif  // BACKFILL_TESTS_TESTING_HARNESS_PROCESSES_H_
