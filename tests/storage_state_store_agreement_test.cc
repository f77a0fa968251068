// A random history of operations applied to a store and to an
// InMemoryStateStore (StateStoreAgreementTest, instantiated for the
// durable stores in storage_state_store_contract_test.cc): every answer,
// and now and then all that the two stores hold, must be the same.

#include <cstdint>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "core/model/job_state_machine.h"
#include "core/ports/state_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/memory_state_store.h"
#include "tests/testing/state_store_contract.h"

namespace backfill {
namespace storage_state_store_agreement_test {
namespace {

using testing::MakeLineage;
using testing::StateStoreAgreementTest;
using testing::T;

std::string Time(absl::Time t) {
  if (t == absl::InfinitePast()) return "-inf";
  if (t == absl::InfiniteFuture()) return "+inf";
  return absl::StrCat(absl::ToUnixMicros(t), "us",
                      t == absl::FromUnixMicros(absl::ToUnixMicros(t))
                          ? ""
                          : "+sub-microsecond");
}

std::string Inputs(const std::vector<InputFingerprint>& inputs) {
  std::vector<std::string> parts;
  for (const InputFingerprint& in : inputs) {
    parts.push_back(absl::StrCat("{", in.dataset, "|", in.partition, "|",
                                 in.fingerprint, "|", in.rows, "}"));
  }
  return absl::StrJoin(parts, ",");
}

std::string Describe(const Job& j) {
  std::string out = absl::StrCat(
      j.id, " ", JobStateName(j.state), " req={", j.request.dataset, "|",
      j.request.from, "|", j.request.to, "|[",
      absl::StrJoin(j.request.partitions, "|"), "]|", j.request.reason, "|",
      j.request.ticket, "|", j.request.requested_by, "|",
      j.request.exclude_downstream, "|", j.request.priority, "|",
      j.request.max_parallel, "} key=", j.idempotency_key,
      " fp=", j.request_fingerprint, " msg=", j.message,
      absl::StrFormat(" cost=%.17g/%.17g", j.plan.cost.backfill,
                      j.plan.cost.full_reload),
      " conflicts=", j.plan.conflicts.size());
  absl::StrAppend(&out, " affected_by=", j.request.affected_by,
                  " auto=", j.request.auto_detect);
  for (const DatasetPlan& dp : j.plan.datasets) {
    absl::StrAppend(&out, " ds={", dp.dataset, "|", dp.reason, "|",
                    dp.transform_version,
                    absl::StrFormat("|%.17g/%.17g|[", dp.cost.backfill,
                                    dp.cost.full_reload),
                    absl::StrJoin(dp.partitions, ","), "]}");
  }
  const PartitionCounts& c = j.counts;
  absl::StrAppend(&out, " counts=", c.total, "/", c.pending, "/", c.running,
                  "/", c.staged, "/", c.published, "/", c.failed, "/",
                  c.cancelled, absl::StrFormat(" actual=%.17g", j.actual_cost),
                  " rows=", j.rows_written, " times=", Time(j.create_time), ",",
                  Time(j.update_time), ",", Time(j.start_time), ",",
                  Time(j.end_time));
  return out;
}

std::string Describe(const PartitionTask& t) {
  return absl::StrCat(t.job_id, " ", t.dataset, "/", t.partition, " ",
                      TaskStateName(t.state), " attempts=", t.attempts,
                      " err=", t.last_error, " rows=", t.rows_written,
                      " out=", t.output_fingerprint, " in=", Inputs(t.inputs),
                      absl::StrFormat(" took=%.17g", t.duration_seconds),
                      " at=", Time(t.update_time));
}

std::string Describe(const LineageRecord& r) {
  return absl::StrCat(r.dataset, "/", r.partition, " ", r.job_id, " ",
                      r.transform_version, " in=", Inputs(r.inputs),
                      " out=", r.output_fingerprint, " rows=", r.row_count, " ",
                      r.reason, "|", r.ticket, "|", r.requested_by,
                      " at=", Time(r.published_at));
}

std::string Describe(const AuditEvent& e) {
  return absl::StrCat(e.seq, " ", e.job_id, " ", e.from_state, ">", e.to_state,
                      ":", e.message, " at=", Time(e.at));
}

std::string Describe(const std::string& s) { return s; }
std::string Describe(int64_t n) { return absl::StrCat(n); }
std::string Describe(const CreateJobResult& r) {
  return absl::StrCat(r.created ? "created " : "existing ", Describe(r.job));
}
std::string Describe(const StoreStats& s) {
  return absl::StrCat("jobs=[", absl::StrJoin(s.jobs_by_state, ","),
                      "] tasks=[", absl::StrJoin(s.tasks_by_state, ","),
                      "] running=", s.running_tasks_done, "/",
                      s.running_tasks_total);
}
std::string Describe(const absl::Status& s) {
  return s.ok() ? "ok"
                : absl::StrCat("error ", absl::StatusCodeToString(s.code()));
}

template <typename T>
std::string Describe(const std::vector<T>& items) {
  std::vector<std::string> parts;
  for (const T& item : items) parts.push_back(Describe(item));
  return absl::StrCat("[", absl::StrJoin(parts, "\n "), "]");
}

template <typename T>
std::string Describe(const absl::StatusOr<T>& result) {
  if (!result.ok()) {
    return absl::StrCat("error ",
                        absl::StatusCodeToString(result.status().code()));
  }
  return Describe(*result);
}

// Everything a store tells about itself, for comparing two stores.
std::string Snapshot(
    StateStore* store, int max_job,
    const std::set<std::pair<std::string, std::string>>& lineage_keys) {
  std::string out;
  JobFilter all;
  all.limit = 0;
  absl::StrAppend(&out, "jobs: ", Describe(store->ListJobs(all)), "\n");
  for (int n = 1; n <= max_job + 1; ++n) {
    const std::string id = absl::StrCat("bf-", n);
    absl::StrAppend(&out, id, " tasks: ", Describe(store->ListTasks(id)),
                    "\n progress: ", Describe(store->GetJobProgress(id)),
                    "\n audit: ", Describe(store->ListAuditEvents(id)), "\n");
  }
  for (const auto& [dataset, partition] : lineage_keys) {
    absl::StrAppend(&out, "lineage ", dataset, "/", partition, ": ",
                    Describe(store->GetLineage(dataset, partition)), "\n");
  }
  for (int s = 0; s < kJobStateCount; ++s) {
    absl::StrAppend(&out, JobStateName(static_cast<JobState>(s)), ": ",
                    Describe(store->ListJobIds({static_cast<JobState>(s)})),
                    "\n");
  }
  absl::StrAppend(&out, "stats: ", Describe(store->Stats()), "\n");
  absl::StrAppend(&out, "last job: ", store->Info()->last_job_number, "\n");
  return out;
}

// Random operations on both stores; every result and, now and then, all
// that the stores hold must be the same.
class History {
 public:
  explicit History(uint32_t seed) : rng_(seed) {}

  // One random operation, applied to each store; returns its description
  // and what each store answered.
  std::string Step(StateStore* a, StateStore* b, std::string* out_a,
                   std::string* out_b) {
    const int op = Uniform(0, 99);
    const absl::Time now = RandomTime();
    if (op < 15) {
      Job job = RandomJob();
      *out_a = Describe(a->CreateJob(job, now));
      *out_b = Describe(b->CreateJob(job, now));
      return "CreateJob";
    }
    const std::string id = RandomId(a);
    if (op < 40) {
      std::optional<JobState> expected;
      if (Uniform(0, 3) > 0) {
        auto job = a->GetJob(id);
        expected = job.ok() && Uniform(0, 4) > 0 ? job->state : RandomState();
      }
      JobState to = RandomState();
      if (Uniform(0, 2) > 0) {
        // Mostly moves the table allows, to get far.
        auto job = a->GetJob(id);
        if (job.ok() && !NextStates(job->state).empty()) {
          std::vector<JobState> next = NextStates(job->state);
          to = next[Uniform(0, static_cast<int>(next.size()) - 1)];
        }
      }
      const std::string msg = RandomText();
      *out_a = Describe(a->TransitionJob(id, expected, to, msg, now));
      *out_b = Describe(b->TransitionJob(id, expected, to, msg, now));
      return absl::StrCat("TransitionJob ", id, " to ", JobStateName(to));
    }
    if (op < 45) {
      const JobState from =
          Uniform(0, 2) > 0 ? JobState::kFailed : RandomState();
      const JobState to = Uniform(0, 2) > 0 ? JobState::kQueued : RandomState();
      *out_a = Describe(a->RetryJob(id, from, to, "retry", now));
      *out_b = Describe(b->RetryJob(id, from, to, "retry", now));
      return absl::StrCat("RetryJob ", id);
    }
    if (op < 50) {
      const JobState state = RandomState();
      const std::string msg = RandomText();
      *out_a = Describe(a->SetJobMessage(id, state, msg, now));
      *out_b = Describe(b->SetJobMessage(id, state, msg, now));
      return absl::StrCat("SetJobMessage ", id);
    }
    if (op < 75) {
      PartitionTask t = RandomTask(a, id);
      *out_a = Describe(a->UpdateTask(t));
      *out_b = Describe(b->UpdateTask(t));
      return absl::StrCat("UpdateTask ", Describe(t));
    }
    if (op < 83) {
      std::vector<TaskState> from;
      for (int s = 0; s < kTaskStateCount; ++s) {
        if (Uniform(0, 2) == 0) from.push_back(static_cast<TaskState>(s));
      }
      const TaskState to = RandomTaskState();
      *out_a = Describe(a->UpdateTasksInState(id, from, to, now));
      *out_b = Describe(b->UpdateTasksInState(id, from, to, now));
      return absl::StrCat("UpdateTasksInState ", id);
    }
    if (op < 95) {
      std::vector<LineageRecord> lineage;
      auto tasks = a->ListTasks(id);
      if (tasks.ok()) {
        for (const PartitionTask& t : *tasks) {
          if (Uniform(0, 2) == 0) continue;
          LineageRecord rec = MakeLineage(
              t.dataset, t.partition,
              Uniform(0, 3) == 0 ? absl::InfinitePast() : RandomTime());
          rec.row_count = Uniform(0, 1000);
          lineage_keys_.insert({t.dataset, t.partition});
          lineage.push_back(rec);
          if (Uniform(0, 20) == 0) lineage.push_back(rec);  // a duplicate
        }
      }
      const JobState to =
          Uniform(0, 3) > 0 ? JobState::kConfirming : RandomState();
      *out_a =
          Describe(a->RecordPublication(id, lineage, to, "published", now));
      *out_b =
          Describe(b->RecordPublication(id, lineage, to, "published", now));
      return absl::StrCat("RecordPublication ", id, " (", lineage.size(),
                          " records) to ", JobStateName(to));
    }
    const int64_t n = Uniform(0, max_job(a) + 3);
    *out_a = Describe(a->ReserveJobNumbers(n));
    *out_b = Describe(b->ReserveJobNumbers(n));
    return absl::StrCat("ReserveJobNumbers ", n);
  }

  int max_job(StateStore* store) {
    return static_cast<int>(store->Info()->last_job_number);
  }
  const std::set<std::pair<std::string, std::string>>& lineage_keys() const {
    return lineage_keys_;
  }

 private:
  int Uniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }

  absl::Time RandomTime() {
    switch (Uniform(0, 9)) {
      case 0:
        return absl::InfiniteFuture();
      case 1:
        return absl::FromUnixNanos(-Uniform(1, 5000));
      default:
        return T(Uniform(0, 100)) + absl::Nanoseconds(Uniform(0, 2999));
    }
  }

  JobState RandomState() {
    return static_cast<JobState>(Uniform(0, kJobStateCount - 1));
  }
  TaskState RandomTaskState() {
    return static_cast<TaskState>(Uniform(0, kTaskStateCount - 1));
  }

  std::string RandomText() {
    static const char* const kTexts[] = {"",    "a",        "x:y", "3:abc",
                                         "ünï", "quote'\"", "12:", ":"};
    return kTexts[Uniform(0, 7)];
  }

  // Mostly a job that exists, sometimes none.
  std::string RandomId(StateStore* store) {
    const int last = static_cast<int>(store->Info()->last_job_number);
    return absl::StrCat("bf-", Uniform(0, last + 2));
  }

  Job RandomJob() {
    static const char* const kDatasets[] = {"a", "b", "c:d", "e"};
    static const char* const kParts[] = {"2025-01-01", "2025-01-02", "", "k:1",
                                         "2025-02"};
    Job job;
    job.request.dataset = kDatasets[Uniform(0, 3)];
    job.request.from = RandomText();
    job.request.to = RandomText();
    for (int i = Uniform(0, 3); i > 0; --i) {
      job.request.partitions.push_back(RandomText());
    }
    job.request.reason = RandomText();
    job.request.ticket = RandomText();
    job.request.requested_by = RandomText();
    job.request.exclude_downstream = Uniform(0, 1) == 1;
    job.request.priority = Uniform(-3, 3);
    job.request.max_parallel = Uniform(0, 4);
    if (Uniform(0, 1) == 0) job.request.affected_by = RandomText();
    if (Uniform(0, 2) == 0) job.idempotency_key = RandomText() + "k";
    job.request_fingerprint = RandomText();
    job.message = RandomText();
    for (int d = Uniform(0, 3); d > 0; --d) {
      DatasetPlan dp;
      dp.dataset = kDatasets[Uniform(0, 3)];
      dp.reason = RandomText();
      dp.transform_version = RandomText();
      dp.cost = {Uniform(0, 100) / 8.0, Uniform(0, 1000) / 3.0};
      for (int p = 0; p < 5; ++p) {
        if (Uniform(0, 1) == 0) dp.partitions.push_back(kParts[p]);
      }
      job.plan.datasets.push_back(dp);
    }
    job.plan.cost = {Uniform(0, 100) * 1.25, Uniform(0, 100) * 0.1};
    return job;
  }

  PartitionTask RandomTask(StateStore* store, const std::string& id) {
    PartitionTask t;
    auto tasks = store->ListTasks(id);
    if (tasks.ok() && !tasks->empty() && Uniform(0, 9) > 0) {
      t = (*tasks)[Uniform(0, static_cast<int>(tasks->size()) - 1)];
    } else {
      t.job_id = id;
      t.dataset = "a";
      t.partition = "nowhere";
    }
    t.state = RandomTaskState();
    t.attempts = Uniform(0, 5);
    t.last_error = RandomText();
    t.rows_written = Uniform(0, 1000000);
    t.output_fingerprint = RandomText();
    t.inputs.clear();
    for (int i = Uniform(0, 3); i > 0; --i) {
      t.inputs.push_back(
          {RandomText(), RandomText(), RandomText(), Uniform(0, 100000)});
    }
    t.duration_seconds = Uniform(0, 10000) / 7.0;
    t.update_time = RandomTime();
    return t;
  }

  std::mt19937 rng_;
  std::set<std::pair<std::string, std::string>> lineage_keys_;
};

TEST_P(StateStoreAgreementTest, GivesTheInMemoryStoresAnswers) {
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    const std::string dir = testing::MakeStateStoreDir();
    ASSERT_FALSE(dir.empty());
    auto sqlite = GetParam().open(dir);
    ASSERT_TRUE(sqlite.ok()) << sqlite.status();
    testing::InMemoryStateStore memory;
    History history(seed);
    int compared_snapshots = 0;
    for (int step = 0; step < 300; ++step) {
      std::string out_sqlite, out_memory;
      const std::string op =
          history.Step(sqlite->get(), &memory, &out_sqlite, &out_memory);
      ASSERT_EQ(out_sqlite, out_memory) << "step " << step << ": " << op;
      if (step % 25 == 24 || step == 299) {
        const int max_job = history.max_job(sqlite->get());
        ASSERT_EQ(Snapshot(sqlite->get(), max_job, history.lineage_keys()),
                  Snapshot(&memory, max_job, history.lineage_keys()))
            << "after step " << step << ": " << op;
        ++compared_snapshots;
      }
    }
    EXPECT_EQ(compared_snapshots, 12);
    // The history went somewhere: jobs, moves and publications happened.
    auto stats = memory.Stats();
    int64_t jobs = 0, moved = 0;
    for (int s = 0; s < kJobStateCount; ++s) {
      jobs += stats->jobs_by_state[s];
      if (s != static_cast<int>(JobState::kQueued)) {
        moved += stats->jobs_by_state[s];
      }
    }
    EXPECT_GT(jobs, 10);
    EXPECT_GT(moved, 3);
    EXPECT_FALSE(history.lineage_keys().empty());
    sqlite->reset();
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace storage_state_store_agreement_test
}  // namespace backfill
