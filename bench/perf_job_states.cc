#include "bench/perf_job_states.h"

#include "core/base/status_macros.h"

namespace backfill::bench {

v1::BackfillRequest RangeRequest(const std::string& dataset,
                                 const std::string& from, const std::string& to,
                                 const std::string& reason) {
  v1::BackfillRequest r;
  r.set_dataset(dataset);
  r.set_from_partition(from);
  r.set_to_partition(to);
  r.set_reason(reason);
  return r;
}

std::string HourPartition(absl::CivilHour h) {
  return absl::FormatCivilTime(h).substr(0, 13);
}

absl::StatusOr<std::map<int, absl::Time>> StatesEntered(BackfillClient& client,
                                                        const std::string& id) {
  v1::ListAuditEventsRequest request;
  request.set_backfill_id(id);
  request.set_page_size(100);
  ASSIGN_OR_RETURN(v1::ListAuditEventsResponse events,
                   client.ListAuditEvents(request));
  std::map<int, absl::Time> entered;
  for (const v1::AuditEvent& e : events.events()) {
    entered.emplace(e.to_state(), absl::FromUnixSeconds(e.time().seconds()) +
                                      absl::Nanoseconds(e.time().nanos()));
  }
  return entered;
}

}  // namespace backfill::bench
