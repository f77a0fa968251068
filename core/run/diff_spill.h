// DiffSpill: a job's diff set aside in an unnamed temporary file, a page at
// a time, between the diff step computing it (DiffStaging, diff_step.h,
// which hands over each chunk of partitions as it finishes, in any order)
// and the state store writing it (StateStore::ReplaceJobDiff, which reads
// it back as DiffPages, in the chunks' order). The diff is then never whole
// in memory, and the store's write transaction lasts as long as reading the
// file back takes, not as long as comparing the partitions in the
// warehouse.
//
// The file is unlinked as soon as it is made: it goes when the spill is
// destroyed, or with the process. It takes about as many bytes as the
// diff's values (a million partitions with ten sample rows each: a few
// hundred megabytes).
//
// Ownership: owns its file.
// Thread-safety: Put may be called from several threads at once; the
// DiffPages methods by one thread at a time, once every Put has returned.

#ifndef BACKFILL_CORE_RUN_DIFF_SPILL_H_
#define BACKFILL_CORE_RUN_DIFF_SPILL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/model/diff.h"
#include "core/ports/state_store.h"

namespace backfill {

class DiffSpill : public DiffPages {
 public:
  // A spill in a new file of directory `dir` ("": $TMPDIR, else /tmp).
  // An error names the directory.
  static absl::StatusOr<std::unique_ptr<DiffSpill>> Create(
      const std::string& dir);

  ~DiffSpill() override;
  DiffSpill(const DiffSpill&) = delete;
  DiffSpill& operator=(const DiffSpill&) = delete;

  // Sets page `index` aside: `partitions` of the dataset with index
  // `dataset` (JobDiffHeader::datasets). Each index at most once
  // (FAILED_PRECONDITION for a second time). A full disk is
  // RESOURCE_EXHAUSTED, an I/O error UNAVAILABLE.
  absl::Status Put(size_t index, size_t dataset,
                   const std::vector<PartitionDiff>& partitions);

  // DiffPages: the pages set aside, by index (an index never put is
  // skipped), each read back as it was put.
  absl::Status Rewind() override;
  absl::StatusOr<bool> Next(size_t* dataset,
                            std::vector<PartitionDiff>* partitions) override;

  // The bytes written to the file.
  int64_t bytes() const;

 private:
  struct Extent {
    int64_t offset = -1;  // -1: never put
    int64_t size = 0;
    size_t dataset = 0;
  };

  DiffSpill(int fd, std::string dir) : fd_(fd), dir_(std::move(dir)) {}

  // The status of a failed system call (errno `err`) on the file, doing
  // `what`.
  absl::Status Failed(const char* what, int err) const;

  const int fd_;
  const std::string dir_;  // for messages
  mutable absl::Mutex mu_;
  std::vector<Extent> pages_ ABSL_GUARDED_BY(mu_);  // by index
  int64_t end_ ABSL_GUARDED_BY(mu_) = 0;
  size_t next_ = 0;  // the index Next reads; the reader's
};

}  // namespace backfill

#endif  // BACKFILL_CORE_RUN_DIFF_SPILL_H_
