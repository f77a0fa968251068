// What the performance suite's rows read of a job's history: when it entered
// each state, from its audit events (the daemon's clock, which is the
// suite's: both run on one machine), and how an hour partition is spelled.
//
// Free functions; thread-safe as far as the client is.

#ifndef BACKFILL_BENCH_PERF_JOB_STATES_H_
#define BACKFILL_BENCH_PERF_JOB_STATES_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "client/backfill_client.h"

namespace backfill::bench {

// "YYYY-MM-DDTHH", the hour partition of `h`.
std::string HourPartition(absl::CivilHour h);

// When job `id` entered each state (v1::BackfillState), from its first 100
// audit events; a state entered twice keeps its first time.
absl::StatusOr<std::map<int, absl::Time>> StatesEntered(BackfillClient& client,
                                                        const std::string& id);

}  // namespace backfill::bench

#endif  // BACKFILL_BENCH_PERF_JOB_STATES_H_
