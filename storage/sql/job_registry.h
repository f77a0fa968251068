// JobRegistry: what the SQL engine remembers in memory of each prepared job
// (Engine::PrepareJob): its layout, its partitions of each dataset it
// recomputes, the partitions it has released since, and the fingerprints
// of its pinned inputs (a pin never changes during the job, so each is
// computed once). After a restart nothing is remembered: PrepareJob must be
// called again.
//
// Ownership: the registry owns immutable snapshots (shared_ptr<const Job>)
// that calls keep while they run; the DatasetSpec pointers of a layout are
// the Catalog's, which must outlive the job.
// Thread-safety: thread-safe. A lookup holds the registry's mutex only to
// copy the pointer, so its cost does not grow with the job's size; a job's
// released partitions and pinned fingerprints have mutexes of their own.

#ifndef BACKFILL_STORAGE_SQL_JOB_REGISTRY_H_
#define BACKFILL_STORAGE_SQL_JOB_REGISTRY_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/ports/engine.h"

namespace backfill::sql {

class JobRegistry {
 public:
  class Job {
   public:
    const JobLayout& layout() const { return layout_; }
    // The dataset is one the job recomputes.
    bool Recomputes(const std::string& dataset) const {
      return partitions_.contains(dataset);
    }
    // The dataset's partition is the job's (prepared, not released).
    bool Has(const std::string& dataset, const std::string& partition) const;
    // The job's partitions of the dataset now, sorted.
    std::vector<std::string> Partitions(const std::string& dataset) const;
    // Forgets partitions the job let go of (Engine::ReleasePartitions).
    void Release(const std::string& dataset,
                 const std::vector<std::string>& partitions) const;
    // The fingerprint of a pinned input, once computed.
    std::optional<InputFingerprint> PinnedFingerprint(
        const std::string& dataset) const;
    void KeepPinnedFingerprint(const InputFingerprint& fingerprint) const;

   private:
    friend class JobRegistry;
    // The partitions of a dataset the job recomputes, sorted and unique:
    // those of its item in layout_ when they are (a plan's are), else a
    // sorted copy of every item's.
    struct Recomputed {
      size_t item = 0;
      bool copied = false;
      std::vector<std::string> copy;
    };
    const std::vector<std::string>& Sorted(const Recomputed& r) const {
      return r.copied ? r.copy : layout_.items[r.item].partitions;
    }

    JobLayout layout_;
    absl::flat_hash_map<std::string, Recomputed> partitions_;
    mutable absl::Mutex released_mu_;
    mutable std::map<std::string, std::set<std::string>> released_
        ABSL_GUARDED_BY(released_mu_);
    mutable absl::Mutex pins_mu_;
    mutable std::map<std::string, InputFingerprint> pinned_
        ABSL_GUARDED_BY(pins_mu_);
  };

  // Remembers the job as `layout` says (a new snapshot: calls still running
  // on the previous one keep theirs). `keep_pins`: the pinned inputs'
  // fingerprints of an earlier snapshot still hold (the snapshots were
  // kept).
  void Register(const JobLayout& layout, bool keep_pins);
  // The job's snapshot; FAILED_PRECONDITION when it is not prepared.
  absl::StatusOr<std::shared_ptr<const Job>> Find(
      const std::string& job_id) const;
  // FAILED_PRECONDITION unless the job recomputes the dataset.
  absl::StatusOr<std::shared_ptr<const Job>> FindRecomputing(
      const std::string& job_id, const std::string& dataset) const;
  void Forget(const std::string& job_id);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<const Job>> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_JOB_REGISTRY_H_
