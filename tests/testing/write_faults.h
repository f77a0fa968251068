// WriteFaults: fault injection for the writes of a fake store
// (InMemoryStateStore). Each write calls Begin with its method's name
// before it changes anything: the call is counted, the hook (if set) is
// called with the name, so that it may block, count or fail the write;
// then the write fails with an injected status if there is one
// (FailNextWrites first, then FailWrites). A write refused this way must
// change nothing.
//
// Thread-safe: one mutex guards the settings and counts; the hook runs
// without it, possibly on many threads at once.

#ifndef BACKFILL_TESTS_TESTING_WRITE_FAULTS_H_
#define BACKFILL_TESTS_TESTING_WRITE_FAULTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace backfill::testing {

class WriteFaults {
 public:
  // Called at the start of every write with the method's name; a non-OK
  // status fails the write.
  using Hook = std::function<absl::Status(const std::string& method)>;

  // What the write of `method` must fail with (OK: it goes on).
  absl::Status Begin(const std::string& method) ABSL_LOCKS_EXCLUDED(mu_);

  // Replaces the hook (nullptr: none).
  void SetHook(Hook hook);
  // Every write fails with `status` until FailWrites(absl::OkStatus()).
  void FailWrites(absl::Status status);
  // The next `n` writes fail with `status` (before a FailWrites status).
  void FailNextWrites(int n, absl::Status status);

  // Writes begun so far, refused ones included: all, or of one method.
  int64_t calls() const;
  int64_t calls(const std::string& method) const;
  // Writes refused by the hook or an injected status.
  int64_t failed() const;

 private:
  mutable absl::Mutex mu_;
  Hook hook_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_writes_ ABSL_GUARDED_BY(mu_);
  int fail_next_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status fail_next_status_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> calls_ ABSL_GUARDED_BY(mu_);
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_WRITE_FAULTS_H_
