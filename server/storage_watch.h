// StorageWatch: looks at the daemon's storage on a thread of its own
// ("bf-storage"), so that damage no write has met yet is seen: the
// warehouse file removed, replaced or truncated under the running daemon.
// Every `interval` it calls each probe; a probe's new verdict is reported
// once two probes in a row agree on it (a moment of inconsistency, such
// as a checkpoint extending the file, is not reported), and only when it
// changes: `report(name, status)` with the failure, then with OK when the
// storage can be used again.
//
// Ownership: owns its thread and the probe functions; whatever the probes
// and `report` reach must outlive Stop().
// Thread-safety: Start and Stop from one thread; report is called on the
// watch's thread only.

#ifndef BACKFILL_SERVER_STORAGE_WATCH_H_
#define BACKFILL_SERVER_STORAGE_WATCH_H_

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace backfill {

class StorageWatch {
 public:
  struct Probe {
    std::string name;  // passed to report
    std::function<absl::Status()> check;
  };
  using Report =
      std::function<void(const std::string& name, const absl::Status& status)>;

  StorageWatch(std::vector<Probe> probes, Report report,
               absl::Duration interval);
  StorageWatch(const StorageWatch&) = delete;
  StorageWatch& operator=(const StorageWatch&) = delete;
  ~StorageWatch();  // calls Stop()

  void Start();
  // Ends the thread; no report follows. Idempotent.
  void Stop();

  // One round of probes, on the caller's thread (tests drive it this way
  // without Start).
  void RunOnce();

 private:
  struct Seen {
    absl::Status reported;  // what was last reported (OK at first)
    absl::Status last;      // the last probe's verdict
  };
  void Loop();

  const std::vector<Probe> probes_;
  const Report report_;
  const absl::Duration interval_;
  std::vector<Seen> seen_;  // by probe; on the watch's thread only
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_STORAGE_WATCH_H_
