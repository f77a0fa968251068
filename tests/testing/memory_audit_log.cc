#include "tests/testing/memory_audit_log.h"

#include <algorithm>
#include <utility>

#include "tests/testing/as_stored.h"

namespace backfill::testing {

void MemoryAuditLog::Append(const std::string& job_id, std::string from_state,
                            std::string to_state, const std::string& message,
                            absl::Time at) {
  AuditEvent e;
  e.seq = next_seq_++;
  e.job_id = job_id;
  e.from_state = std::move(from_state);
  e.to_state = std::move(to_state);
  e.message = message;
  e.at = StoredTime(at);
  by_job_[job_id].push_back(std::move(e));
}

void MemoryAuditLog::AppendSubject(const std::string& subject,
                                   std::string from_state, std::string to_state,
                                   const std::string& message, absl::Time at) {
  AuditEvent e;
  e.seq = next_seq_++;
  e.subject = subject;
  e.from_state = std::move(from_state);
  e.to_state = std::move(to_state);
  e.message = message;
  e.at = StoredTime(at);
  by_job_[""].push_back(std::move(e));
}

std::vector<AuditEvent> MemoryAuditLog::Of(const std::string& job_id) const {
  if (job_id.empty()) return {};
  auto it = by_job_.find(job_id);
  if (it == by_job_.end()) return {};
  return it->second;
}

std::vector<AuditEvent> MemoryAuditLog::Select(const AuditQuery& query) const {
  // As SQLite compares it: to the microsecond, rounded down; an infinite
  // time (NULL there) selects every time.
  const absl::Time since = StoredTime(query.since);
  std::vector<AuditEvent> all;
  for (const auto& [job_id, events] : by_job_) {
    if (!query.job_id.empty() && job_id != query.job_id) continue;
    for (const AuditEvent& e : events) {
      if (e.seq <= query.after_seq) continue;
      if (since != absl::InfinitePast() &&
          (e.at == absl::InfinitePast() || e.at < since)) {
        continue;
      }
      all.push_back(e);
    }
  }
  std::sort(
      all.begin(), all.end(),
      [](const AuditEvent& a, const AuditEvent& b) { return a.seq < b.seq; });
  const size_t limit = static_cast<size_t>(std::max(query.limit, 1));
  if (all.size() > limit) all.resize(limit);
  return all;
}

}  // namespace backfill::testing
