// StorageAlarm: every failure is reported; the first success after
// failures reports one recovery, however many threads succeed at once; a
// success with nothing failing reports nothing; the observer never sees a
// recovery overtaken by the failure it ends (the last event matches the
// alarm's state).

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/run/storage_alarm.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_storage_alarm_test {
namespace {

using Storage = JobObserver::Storage;

class Recorder : public JobObserver {
 public:
  void OnStorageFailing(Storage storage, const std::string& /*what*/,
                        const absl::Status& /*status*/) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(storage == Storage::kWarehouse ? "W-" : "S-");
  }
  void OnStorageRecovered(Storage storage) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(storage == Storage::kWarehouse ? "W+" : "S+");
  }
  std::vector<std::string> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
};

TEST(StorageAlarmTest, EachFailureAndOneRecoveryPerSpell) {
  Recorder recorder;
  StorageAlarm alarm(&recorder);
  const absl::Status full = absl::ResourceExhaustedError("disk full");
  alarm.Succeeded(Storage::kWarehouse);  // nothing failed: nothing to say
  alarm.Failed(Storage::kWarehouse, "staging a", full);
  alarm.Failed(Storage::kWarehouse, "staging b", full);
  EXPECT_TRUE(alarm.failing(Storage::kWarehouse));
  EXPECT_FALSE(alarm.failing(Storage::kStateStore));
  alarm.Succeeded(Storage::kStateStore);  // the other storage: nothing
  alarm.Succeeded(Storage::kWarehouse);
  alarm.Succeeded(Storage::kWarehouse);
  alarm.Failed(Storage::kStateStore, "checkpoint", full);
  alarm.Succeeded(Storage::kStateStore);
  EXPECT_EQ(recorder.events(),
            (std::vector<std::string>{"W-", "W-", "W+", "S-", "S+"}));
  EXPECT_FALSE(alarm.failing(Storage::kWarehouse));
}

TEST(StorageAlarmTest,
     ConcurrentSuccessesReportOneRecoveryAndTheLastWordHolds) {
  for (int round = 0; round < 200; ++round) {
    Recorder recorder;
    StorageAlarm alarm(&recorder);
    const absl::Status full = absl::ResourceExhaustedError("disk full");
    alarm.Failed(Storage::kWarehouse, "w", full);
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        while (!go) {
        }
        if (t == 3) {
          alarm.Failed(Storage::kWarehouse, "again", full);
        } else {
          alarm.Succeeded(Storage::kWarehouse);
        }
      });
    }
    go = true;
    for (std::thread& t : threads) t.join();
    const std::vector<std::string> events = recorder.events();
    int recoveries = 0;
    for (const std::string& e : events) recoveries += e == "W+";
    EXPECT_GE(recoveries, 1);
    EXPECT_LE(recoveries, 2);  // before and after the second failure
    // What the observer heard last is what the alarm holds.
    EXPECT_EQ(events.back() == "W-", alarm.failing(Storage::kWarehouse))
        << round;
  }
}

}  // namespace
}  // namespace core_storage_alarm_test
}  // namespace backfill
