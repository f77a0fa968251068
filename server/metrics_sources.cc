#include "server/metrics_sources.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/status_macros.h"
#include "core/model/consumer_spec.h"
#include "core/model/job.h"

namespace backfill {

void ConfigureMetricsSources(const Catalog& catalog, StateStore* store,
                             Metrics* metrics) {
  // Per-dataset series exist from the start, for every dataset a job
  // writes (derived ones).
  std::vector<std::string> datasets;
  for (const DatasetSpec& spec : catalog.datasets()) {
    if (spec.kind == DatasetKind::kDerived) datasets.push_back(spec.name);
  }
  metrics->DeclareDatasets(datasets);
  // The ETA gauges read the running jobs at scrape time: their progress
  // (counts and timings), never their partition lists.
  metrics->SetRunningJobs([store]() -> absl::StatusOr<std::vector<Job>> {
    ASSIGN_OR_RETURN(std::vector<std::string> ids,
                     store->ListJobIds({JobState::kRunning}));
    std::vector<Job> jobs;
    jobs.reserve(ids.size());
    for (const std::string& id : ids) {
      absl::StatusOr<Job> job = store->GetJobProgress(id);
      if (job.ok()) {
        jobs.push_back(*std::move(job));
      } else if (!absl::IsNotFound(job.status())) {
        return job.status();
      }
    }
    return jobs;
  });
  // Consumer health from the store, for the consumers declared now.
  std::set<std::pair<std::string, std::string>> declared;
  for (const DatasetSpec& spec : catalog.datasets()) {
    for (const ConsumerSpec& c : spec.consumers) {
      declared.emplace(spec.name, c.name);
    }
  }
  metrics->SetConsumerStandings(
      [store, declared]() -> absl::StatusOr<std::vector<ConsumerStanding>> {
        ASSIGN_OR_RETURN(std::vector<ConsumerStanding> all,
                         store->ListConsumerStandings());
        std::vector<ConsumerStanding> out;
        for (ConsumerStanding& s : all) {
          if (declared.count({s.dataset, s.consumer})) {
            out.push_back(std::move(s));
          }
        }
        return out;
      });
}

}  // namespace backfill
