// What the performance suite's rows ask of a job and read of its history:
// the request of a range of partitions, how an hour partition is spelled,
// and when a job entered each state, from its audit events (the daemon's
// clock, which is the suite's: both run on one machine).
//
// Free functions; thread-safe as far as the client is.

#ifndef BACKFILL_BENCH_PERF_JOB_STATES_H_
#define BACKFILL_BENCH_PERF_JOB_STATES_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.pb.h"
#include "client/backfill_client.h"

namespace backfill::bench {

// A backfill of `dataset` over [from, to), with `reason`.
v1::BackfillRequest RangeRequest(const std::string& dataset,
                                 const std::string& from, const std::string& to,
                                 const std::string& reason);

// "YYYY-MM-DDTHH", the hour partition of `h`.
std::string HourPartition(absl::CivilHour h);

// When job `id` entered each state (v1::BackfillState), from its first 100
// audit events; a state entered twice keeps its first time.
absl::StatusOr<std::map<int, absl::Time>> StatesEntered(BackfillClient& client,
                                                        const std::string& id);

}  // namespace backfill::bench

#endif  // BACKFILL_BENCH_PERF_JOB_STATES_H_
