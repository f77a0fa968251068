// The metrics and the log of a replica of a group: backfill_node_leases
// (server/node_leases_collector.h) counts the live leases this replica
// holds by step kind, every kind present, read from the LeaseStore at each
// scrape; backfill_lease_takeovers_total counts OnLeaseTakeover; the
// LoggingObserver logs a takeover as a warning and passes it on. The
// store is a fixed list of leases written here.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/ports/lease_store.h"
#include "core/run/job_observer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/logging_observer.h"
#include "server/metrics.h"
#include "server/node_leases_collector.h"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"
#include "tests/testing/prometheus_text.h"

namespace backfill {
namespace server_node_metrics_test {
namespace {

using ::backfill::testing::ParseSamples;
using ::backfill::testing::SumOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// Reads only: ListLeases answers the leases set (or the error set); the
// other methods are not called by what is tested here.
class FixedLeases final : public LeaseStore {
 public:
  absl::Status Heartbeat(const NodeRecord&) override { return Unused(); }
  absl::Status Leave(const std::string&) override { return Unused(); }
  absl::StatusOr<std::vector<NodeRecord>> ListNodes() override {
    return Unused();
  }
  absl::StatusOr<ClaimResult> Claim(const std::string&, const std::string&,
                                    const std::string&,
                                    absl::Duration) override {
    return Unused();
  }
  absl::StatusOr<std::vector<std::string>> Renew(const std::string&,
                                                 const std::vector<JobLease>&,
                                                 absl::Duration) override {
    return Unused();
  }
  absl::Status Release(const JobLease&) override { return Unused(); }
  absl::StatusOr<std::vector<JobLease>> ListLeases() override {
    absl::MutexLock lock(&mu_);
    ++reads_;
    if (!failure_.ok()) return failure_;
    return leases_;
  }
  // Requests between replicas: not used by these tests.
  absl::StatusOr<int64_t> SendRequest(const NodeRequest&) override {
    return absl::UnimplementedError("no requests in this test");
  }
  absl::StatusOr<std::vector<NodeRequest>> TakeRequests(
      const std::string&) override {
    return std::vector<NodeRequest>();
  }
  absl::Status AnswerRequest(int64_t, const NodeAnswer&) override {
    return absl::UnimplementedError("no requests in this test");
  }
  absl::StatusOr<std::optional<NodeAnswer>> ReadAnswer(int64_t, bool) override {
    return absl::NotFoundError("no requests in this test");
  }

  void Set(std::vector<JobLease> leases) {
    absl::MutexLock lock(&mu_);
    leases_ = std::move(leases);
  }
  void Fail(absl::Status status) {
    absl::MutexLock lock(&mu_);
    failure_ = std::move(status);
  }
  int reads() {
    absl::MutexLock lock(&mu_);
    return reads_;
  }

 private:
  static absl::Status Unused() {
    return absl::UnimplementedError("not used by these tests");
  }
  absl::Mutex mu_;
  std::vector<JobLease> leases_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  int reads_ ABSL_GUARDED_BY(mu_) = 0;
};

JobLease Lease(const std::string& job, const std::string& node,
               const std::string& step, bool live = true) {
  JobLease lease;
  lease.job_id = job;
  lease.node = node;
  lease.step = step;
  lease.token = 1;
  lease.expires_at =
      absl::Now() + (live ? absl::Seconds(5) : -absl::Seconds(5));
  lease.live = live;
  return lease;
}

double Held(const std::string& scrape, const std::string& kind) {
  return SumOf(ParseSamples(scrape), "backfill_node_leases", {{"kind", kind}});
}

std::unique_ptr<Metrics> NewMetrics() {
  return std::make_unique<Metrics>([] { return StoreStats(); }, "0.4.0");
}

TEST(NodeLeasesCollectorTest, CountsTheLiveLeasesOfThisReplicaByKind) {
  FixedLeases store;
  std::unique_ptr<Metrics> metrics = NewMetrics();
  metrics->AddCollectable(
      std::make_shared<NodeLeasesCollector>(&store, "node-a"));

  // Nothing held: every kind at 0.
  std::string text = metrics->Scrape();
  for (const char* kind : kLeaseStepKinds) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("backfill_node_leases{kind=\"",
                                             kind, "\"} 0")));
  }
  EXPECT_THAT(text, HasSubstr("# TYPE backfill_node_leases gauge"));
  EXPECT_THAT(text, Not(HasSubstr("kind=\"other\"")));

  store.Set({Lease("bf-1", "node-a", "run"), Lease("bf-2", "node-a", "run"),
             Lease("bf-3", "node-a", "run"), Lease("bf-4", "node-a", "publish"),
             // Expired: no longer this replica's.
             Lease("bf-5", "node-a", "validate", /*live=*/false),
             // Another replica's.
             Lease("bf-6", "node-b", "confirm"),
             Lease("bf-7", "node-b", "run")});
  text = metrics->Scrape();
  EXPECT_EQ(Held(text, "run"), 3);
  EXPECT_EQ(Held(text, "publish"), 1);
  EXPECT_EQ(Held(text, "validate"), 0);
  EXPECT_EQ(Held(text, "confirm"), 0);
  EXPECT_EQ(Held(text, "rollback"), 0);
  EXPECT_THAT(text, Not(HasSubstr("kind=\"other\"")));
  EXPECT_THAT(text, Not(HasSubstr("bf-")));
  EXPECT_THAT(text, Not(HasSubstr("node-")));

  // Read at every scrape: the gauge follows the store.
  store.Set({Lease("bf-8", "node-a", "rollback"),
             Lease("bf-9", "node-a", "resample")});
  text = metrics->Scrape();
  EXPECT_EQ(Held(text, "run"), 0);
  EXPECT_EQ(Held(text, "rollback"), 1);
  EXPECT_EQ(Held(text, "other"), 1);
  EXPECT_EQ(store.reads(), 3);
}

TEST(NodeLeasesCollectorTest, LeavesTheFamilyOutWhenTheStoreCannotBeRead) {
  FixedLeases store;
  store.Fail(absl::UnavailableError("connection refused"));
  NodeLeasesCollector collector(&store, "node-a");
  EXPECT_TRUE(collector.Collect().empty());
  std::unique_ptr<Metrics> metrics = NewMetrics();
  metrics->AddCollectable(
      std::make_shared<NodeLeasesCollector>(&store, "node-a"));
  const std::string text = metrics->Scrape();
  EXPECT_THAT(text, Not(HasSubstr("backfill_node_leases")));
  // The rest of the scrape is still served.
  EXPECT_THAT(text, HasSubstr("backfill_build_info"));
}

TEST(LeaseTakeoverMetricTest, CountsEveryTakeoverFromZero) {
  std::unique_ptr<Metrics> metrics = NewMetrics();
  EXPECT_THAT(metrics->Scrape(),
              HasSubstr("# TYPE backfill_lease_takeovers_total counter"));
  EXPECT_THAT(metrics->Scrape(),
              HasSubstr("\nbackfill_lease_takeovers_total 0\n"));
  metrics->OnLeaseTakeover("bf-1", "node-b");
  metrics->OnLeaseTakeover("bf-2", "node-c");
  const std::string text = metrics->Scrape();
  EXPECT_THAT(text, HasSubstr("\nbackfill_lease_takeovers_total 2\n"));
  // Neither the job nor the replica is a label.
  EXPECT_THAT(text, Not(HasSubstr("node-b")));
  EXPECT_THAT(text, Not(HasSubstr("bf-1")));
}

// Records the takeovers it receives.
class Takeovers final : public JobObserver {
 public:
  void OnLeaseTakeover(const std::string& job_id,
                       const std::string& from_node) override {
    seen.push_back(job_id + " from " + from_node);
  }
  std::vector<std::string> seen;
};

class LoggingObserverTakeoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = spdlog::default_logger();
    log_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(100);
    log_->set_pattern("%l %v");
    spdlog::set_default_logger(
        std::make_shared<spdlog::logger>("backfilld", log_));
    spdlog::set_level(spdlog::level::info);
  }
  void TearDown() override { spdlog::set_default_logger(previous_); }

  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> log_;
};

TEST_F(LoggingObserverTakeoverTest, LogsAWarningAndPassesItOn) {
  Takeovers next;
  LoggingObserver observer(&next);
  observer.OnLeaseTakeover("bf-7", "node-b");
  // A replica's name is stored text: it cannot forge a log line.
  observer.OnLeaseTakeover("bf-8", "node-c\nINFO all good");
  EXPECT_THAT(log_->last_formatted(),
              ElementsAre("warning job bf-7 taken over from replica node-b "
                          "(its lease expired)\n",
                          "warning job bf-8 taken over from replica "
                          "node-c\\nINFO all good (its lease expired)\n"));
  EXPECT_THAT(next.seen, ElementsAre("bf-7 from node-b",
                                     "bf-8 from node-c\nINFO all good"));
}

}  // namespace
}  // namespace server_node_metrics_test
}  // namespace backfill
