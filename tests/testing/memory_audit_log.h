// MemoryAuditLog: the audit log of the in-memory state store
// (memory_state_store.h), kept as SqliteStateStore keeps its audit_events
// table: append-only, each event with a seq over all jobs in the order
// appended, its time as stored (as_stored.h).
//
// Thread-compatible: the store calls it with its own mutex held.

#ifndef BACKFILL_TESTS_TESTING_MEMORY_AUDIT_LOG_H_
#define BACKFILL_TESTS_TESTING_MEMORY_AUDIT_LOG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/model/job.h"
#include "core/ports/state_store.h"

namespace backfill::testing {

class MemoryAuditLog {
 public:
  // Appends an event of job `job_id` ("" as `from_state`: its creation).
  void Append(const std::string& job_id, std::string from_state,
              std::string to_state, const std::string& message, absl::Time at);

  // Appends an event of a replay policy (no job; AuditEvent::subject).
  void AppendSubject(const std::string& subject, std::string from_state,
                     std::string to_state, const std::string& message,
                     absl::Time at);

  // StateStore::ListAuditEvents and ListAuditLog.
  std::vector<AuditEvent> Of(const std::string& job_id) const;
  std::vector<AuditEvent> Select(const AuditQuery& query) const;

  // The seq of the newest event (0: none).
  int64_t last_seq() const { return next_seq_ - 1; }

 private:
  // Job id ("" for the events of no job) -> its events, in seq order.
  std::map<std::string, std::vector<AuditEvent>> by_job_;
  int64_t next_seq_ = 1;
};

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_MEMORY_AUDIT_LOG_H_
