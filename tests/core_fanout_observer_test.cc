// FanoutObserver passes every JobObserver event to each observer, in
// order, skipping null ones.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/run/fanout_observer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_fanout_observer_test {
namespace {

using ::testing::ElementsAre;

class Recorder final : public JobObserver {
 public:
  Recorder(std::string name, std::vector<std::string>* log)
      : name_(std::move(name)), log_(log) {}
  void OnJobTransition(const std::string& job_id, JobState from, JobState to,
                       const std::string& message) override {
    Add("transition " + job_id + " " + message);
  }
  void OnPartitionAttempt(bool ok, absl::Duration) override {
    Add(ok ? "attempt ok" : "attempt failed");
  }
  void OnPartitionStageTimings(const std::string& dataset,
                               const StageTimings& timings) override {
    Add("timings " + dataset + " " + absl::FormatDuration(timings.transform) +
        " " + absl::FormatDuration(timings.fingerprint) + " " +
        absl::FormatDuration(timings.stage_write));
  }
  void OnJobValidationTime(const std::string& job_id,
                           absl::Duration duration) override {
    Add("validated " + job_id + " " + absl::FormatDuration(duration));
  }
  void OnPartitionCheckpointed(const std::string& dataset, TaskState,
                               int64_t rows) override {
    Add("checkpointed " + dataset + " " + std::to_string(rows));
  }
  void OnJobPublished(const std::string& job_id,
                      const std::vector<PublishedDataset>& datasets) override {
    Add("published " + job_id + " " + datasets.at(0).dataset);
  }
  void OnCheckFailed(const std::string& dataset, const std::string& kind,
                     CheckSeverity) override {
    Add("check " + dataset + " " + kind);
  }
  void OnJobFinished(const std::string& job_id, JobState, double,
                     double) override {
    Add("finished " + job_id);
  }
  void OnConsumerConfirmed(const std::string& dataset,
                           const std::string& consumer, bool healthy,
                           absl::Duration) override {
    Add("consumer " + dataset + " " + consumer + (healthy ? " up" : " down"));
  }
  void OnStorageFailing(Storage, const std::string& what,
                        const absl::Status&) override {
    Add("failing " + what);
  }
  void OnStorageRecovered(Storage) override { Add("recovered"); }
  void OnLeaseTakeover(const std::string& job_id,
                       const std::string& from_node) override {
    Add("takeover " + job_id + " from " + from_node);
  }

 private:
  void Add(const std::string& event) { log_->push_back(name_ + ": " + event); }
  std::string name_;
  std::vector<std::string>* log_;
};

TEST(FanoutObserverTest, EveryEventReachesEveryObserverInOrder) {
  std::vector<std::string> log;
  Recorder a("a", &log);
  Recorder b("b", &log);
  FanoutObserver fanout({&a, nullptr, &b});
  JobObserver& o = fanout;
  o.OnJobTransition("bf-1", JobState::kQueued, JobState::kRunning, "go");
  o.OnPartitionAttempt(true, absl::Seconds(1));
  StageTimings timings;
  timings.transform = absl::Milliseconds(40);
  timings.fingerprint = absl::Milliseconds(3);
  timings.stage_write = absl::Milliseconds(5);
  o.OnPartitionStageTimings("daily", timings);
  o.OnPartitionCheckpointed("daily", TaskState::kStaged, 7);
  JobObserver::PublishedDataset published;
  published.dataset = "daily";
  o.OnJobPublished("bf-1", {published});
  o.OnCheckFailed("daily", "min_rows", CheckSeverity::kError);
  o.OnJobValidationTime("bf-1", absl::Milliseconds(250));
  o.OnJobFinished("bf-1", JobState::kSucceeded, 1, 1);
  o.OnConsumerConfirmed("daily", "cache", false, absl::Seconds(2));
  o.OnStorageFailing(JobObserver::Storage::kWarehouse, "publish",
                     absl::UnavailableError("disk"));
  o.OnStorageRecovered(JobObserver::Storage::kWarehouse);
  o.OnLeaseTakeover("bf-2", "node-b");
  EXPECT_THAT(
      log,
      ElementsAre(
          "a: transition bf-1 go", "b: transition bf-1 go", "a: attempt ok",
          "b: attempt ok", "a: timings daily 40ms 3ms 5ms",
          "b: timings daily 40ms 3ms 5ms", "a: checkpointed daily 7",
          "b: checkpointed daily 7", "a: published bf-1 daily",
          "b: published bf-1 daily", "a: check daily min_rows",
          "b: check daily min_rows", "a: validated bf-1 250ms",
          "b: validated bf-1 250ms", "a: finished bf-1", "b: finished bf-1",
          "a: consumer daily cache down", "b: consumer daily cache down",
          "a: failing publish", "b: failing publish", "a: recovered",
          "b: recovered", "a: takeover bf-2 from node-b",
          "b: takeover bf-2 from node-b"));
}

}  // namespace
}  // namespace core_fanout_observer_test
}  // namespace backfill
