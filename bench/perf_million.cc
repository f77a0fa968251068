#include "bench/perf_million.h"

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.pb.h"
#include "bench/perf_daemon.h"
#include "bench/perf_fixtures.h"
#include "bench/perf_job_states.h"
#include "bench/perf_process.h"
#include "bench/perf_read_probe.h"
#include "core/base/status_macros.h"

namespace backfill::bench {
namespace {

namespace fs = std::filesystem;

std::string Mb(int64_t kb) { return absl::StrFormat("%.0f MB", kb / 1024.0); }

// "RUNNING" for BACKFILL_STATE_RUNNING, in lower case.
std::string StateName(int state) {
  std::string name =
      v1::BackfillState_Name(static_cast<v1::BackfillState>(state));
  const std::string prefix = "BACKFILL_STATE_";
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  return absl::AsciiStrToLower(name);
}

// The resident memory of a process every `interval`, on a thread of its
// own until Stop().
class RssSampler {
 public:
  struct Sample {
    absl::Time time;
    int64_t rss_kb = 0;
  };

  RssSampler(pid_t pid, absl::Duration interval)
      : pid_(pid), interval_(interval) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~RssSampler() { Stop(); }

  RssSampler(const RssSampler&) = delete;
  RssSampler& operator=(const RssSampler&) = delete;

  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  // After Stop().
  const std::vector<Sample>& samples() const { return samples_; }

 private:
  void Loop() {
    while (!stop_.load()) {
      absl::StatusOr<ProcessSample> s = SampleProcess(pid_);
      if (!s.ok()) return;
      samples_.push_back({absl::Now(), s->rss_kb});
      absl::SleepFor(interval_);
    }
  }

  const pid_t pid_;
  const absl::Duration interval_;
  std::atomic<bool> stop_{false};
  std::vector<Sample> samples_;
  std::thread thread_;
};

// What the daemon does while a job is in `state`, as the audit events'
// times divide it: the event into QUEUED is recorded once the submit
// planned the job, before its tasks are created; the one into CONFIRMING
// carries the time the publish began recording the publication (the
// lineage), not when it finished.
std::string PhaseName(int state) {
  switch (state) {
    case v1::BACKFILL_STATE_QUEUED:
      return "tasks created and job started";
    case v1::BACKFILL_STATE_RUNNING:
      return "staging";
    case v1::BACKFILL_STATE_VALIDATING:
      return "validation";
    case v1::BACKFILL_STATE_PUBLISHING:
      return "publish";
    case v1::BACKFILL_STATE_CONFIRMING:
      return "lineage recorded and confirm";
    default:
      return StateName(state);
  }
}

// "plan 2.1 s (580 MB), tasks created and job started 20.3 s (1400 MB),
// ...": the time in each state the job went through (PhaseName), in order,
// from `sent` (the client's submit), and the highest resident memory
// sampled in it.
std::string Phases(absl::Time sent, const std::map<int, absl::Time>& entered,
                   const std::vector<RssSampler::Sample>& samples) {
  std::vector<std::pair<absl::Time, int>> starts;
  for (const auto& [state, time] : entered) starts.push_back({time, state});
  std::sort(starts.begin(), starts.end());
  std::string out;
  absl::Time from = sent;
  std::string name = "plan";
  auto add = [&](absl::Time until) {
    int64_t peak = 0;
    for (const RssSampler::Sample& s : samples) {
      if (s.time >= from && s.time < until) peak = std::max(peak, s.rss_kb);
    }
    absl::StrAppend(&out, out.empty() ? "" : ", ", name, " ",
                    Sec(absl::ToDoubleSeconds(until - from)));
    if (peak > 0) absl::StrAppend(&out, " (", Mb(peak), ")");
  };
  for (const auto& [time, state] : starts) {
    if (state == v1::BACKFILL_STATE_SUCCEEDED) {
      add(time);
      break;
    }
    if (time < from) continue;
    add(time);
    from = time;
    name = PhaseName(state);
  }
  return out;
}

// The partitions job `job` has checkpointed (staged or beyond).
int64_t Checkpointed(const v1::Backfill& job) {
  return job.partitions().staged() + job.partitions().published() +
         job.partitions().unchanged();
}

class MillionBench {
 public:
  MillionBench(const MillionBenchOptions& options, std::vector<Row>* rows)
      : options_(options),
        rows_(rows),
        n_(options.quick ? 20'000 : 1'000'000),
        data_(options.dir / "million") {}

  absl::Status Run() {
    fs::create_directories(data_ / "pipelines");
    RETURN_IF_ERROR(WriteTextFile((data_ / "pipelines" / "bench.yaml").string(),
                                  TrivialHourlyPipelineYaml("ticks")));
    RETURN_IF_ERROR(
        AddEmptyHourTable((data_ / "warehouse.db").string(), "ticks"));
    RETURN_IF_ERROR(PlanRow());
    RETURN_IF_ERROR(JobRows());
    return RestartRow();
  }

 private:
  v1::BackfillRequest Request(int64_t k) const {
    const absl::CivilHour start(2000, 1, 1, 0);
    return RangeRequest("hourly_ticks", HourPartition(start + k * n_),
                        HourPartition(start + (k + 1) * n_),
                        absl::StrCat("bench: ", Count(n_), " hours"));
  }

  absl::StatusOr<std::unique_ptr<BenchDaemon>> StartDaemon() const {
    DaemonOptions daemon;
    daemon.binary = options_.backfilld;
    daemon.data_dir = data_.string();
    daemon.workers = options_.workers;
    daemon.extra_args = {"--max-partitions-per-job", absl::StrCat(n_)};
    return BenchDaemon::Start(daemon);
  }

  // PlanBackfill of the n partitions, as a client sees it.
  absl::Status PlanRow() {
    Log(absl::StrCat("plans of ", Count(n_), " partitions"));
    ASSIGN_OR_RETURN(std::unique_ptr<BenchDaemon> daemon, StartDaemon());
    const int repeats = 3;
    std::vector<double> plans;
    int64_t planned = 0;
    size_t bytes = 0;
    for (int i = 0; i < repeats + 1; ++i) {
      const absl::Time t = absl::Now();
      ASSIGN_OR_RETURN(v1::PlanBackfillResponse plan,
                       daemon->client().Plan(Request(0)));
      if (i > 0) plans.push_back(absl::ToDoubleSeconds(absl::Now() - t));
      planned = plan.total_partitions();
      bytes = plan.ByteSizeLong();
    }
    ASSIGN_OR_RETURN(ProcessSample sample, daemon->Sample());
    daemon->Stop();
    if (planned != n_) {
      return absl::InternalError(
          absl::StrCat("the plan holds ", planned, " partitions, not ", n_));
    }
    const double median = Median(plans);
    rows_->push_back(
        {absl::StrCat("PlanBackfill of ", Count(n_),
                      " hour partitions (the client's wait)"),
         "< 2 s",
         absl::StrFormat("median of %d (%s, %s, %s); the answer %.0f kB; the "
                         "daemon's peak RSS %s",
                         repeats, Sec(plans[0]), Sec(plans[1]), Sec(plans[2]),
                         bytes / 1024.0, Mb(sample.peak_rss_kb)),
         Sec(median), median < 2.0});
    return absl::OkStatus();
  }

  // The job of n partitions on a fresh daemon, and the reads answered
  // while it runs.
  absl::Status JobRows() {
    Log(absl::StrCat("a job of ", Count(n_), " partitions"));
    ASSIGN_OR_RETURN(std::unique_ptr<BenchDaemon> daemon, StartDaemon());
    ASSIGN_OR_RETURN(ProcessSample before, daemon->Sample());
    RssSampler sampler(daemon->pid(),
                       absl::Milliseconds(options_.quick ? 100 : 500));
    const absl::Time sent = absl::Now();
    ASSIGN_OR_RETURN(v1::SubmitBackfillResponse submitted,
                     daemon->client().Submit(Request(0), ""));
    const double submit_seconds = absl::ToDoubleSeconds(absl::Now() - sent);
    const std::string id = submitted.backfill().id();
    ReadProbe probe(&daemon->client(), id);
    ASSIGN_OR_RETURN(v1::Backfill finished, daemon->WaitForJob(id));
    const double wall = absl::ToDoubleSeconds(absl::Now() - sent);
    probe.Stop();
    sampler.Stop();
    ASSIGN_OR_RETURN(ProcessSample after, daemon->Sample());
    ASSIGN_OR_RETURN(auto entered, StatesEntered(daemon->client(), id));
    daemon->Stop();
    if (finished.partitions().published() != n_) {
      return absl::InternalError(absl::StrCat("job ", id, " published ",
                                              finished.partitions().published(),
                                              " partitions, not ", n_));
    }
    const double rate = n_ / wall;
    const double cpu = after.cpu_seconds - before.cpu_seconds;
    rows_->push_back(
        {absl::StrCat(Count(n_),
                      "-partition trivial job, durable checkpoints, submit to "
                      "SUCCEEDED (a fresh daemon)"),
         "peak RSS < 400 MB",
         absl::StrFormat(
             "%s wall, daemon CPU %.1f s (%.0f us/partition); the submit "
             "call %s; by phase (from the audit events), with the highest "
             "RSS sampled in it: %s",
             Sec(wall), cpu, cpu / n_ * 1e6, Sec(submit_seconds),
             Phases(sent, entered, sampler.samples())),
         absl::StrFormat("%s partitions/s; %s", Count(rate),
                         Mb(after.peak_rss_kb)),
         after.peak_rss_kb < 400 * 1024});

    const ReadProbe::Latencies& l = probe.latencies();
    const double worst = probe.WorstP99();
    rows_->push_back(
        {absl::StrCat("status, list and watch while the ", Count(n_),
                      "-partition job runs (from its submit's answer to "
                      "SUCCEEDED)"),
         "p99 < 100 ms each", probe.Figures(),
         absl::StrFormat("%.1f ms", worst * 1e3),
         l.errors == 0 && !l.get.empty() && worst < 0.100});
    return absl::OkStatus();
  }

  // A job of the next n hours, its daemon killed once a tenth of it is
  // checkpointed and started again.
  absl::Status RestartRow() {
    Log(absl::StrCat("a job of ", Count(n_), " partitions killed at 10%"));
    ASSIGN_OR_RETURN(std::unique_ptr<BenchDaemon> daemon, StartDaemon());
    const absl::Time sent = absl::Now();
    ASSIGN_OR_RETURN(v1::SubmitBackfillResponse submitted,
                     daemon->client().Submit(Request(1), ""));
    const std::string id = submitted.backfill().id();
    int64_t done_before = 0;
    while (true) {
      ASSIGN_OR_RETURN(v1::Backfill b,
                       daemon->client().Get(id, v1::BACKFILL_VIEW_BASIC));
      done_before = Checkpointed(b);
      if (done_before >= n_ / 10) break;
      if (b.state() != v1::BACKFILL_STATE_QUEUED &&
          b.state() != v1::BACKFILL_STATE_RUNNING) {
        return absl::InternalError(absl::StrCat("job ", id, " is ",
                                                StateName(b.state()),
                                                " before a tenth of it "
                                                "was checkpointed"));
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    ASSIGN_OR_RETURN(ProcessSample first_peak, daemon->Sample());
    daemon->Kill();
    const absl::Time killed = absl::Now();
    Log(absl::StrCat("restart after ", Count(done_before), " partitions"));
    ASSIGN_OR_RETURN(daemon, StartDaemon());
    const double serving = daemon->seconds_to_serving();
    const absl::Time served = absl::Now();
    ASSIGN_OR_RETURN(v1::Backfill b0,
                     daemon->client().Get(id, v1::BACKFILL_VIEW_BASIC));
    const int64_t done_at_start = Checkpointed(b0);
    double resumed = -1;
    while (done_at_start < b0.partitions().total() &&
           absl::Now() - served < absl::Minutes(5)) {
      ASSIGN_OR_RETURN(v1::Backfill b,
                       daemon->client().Get(id, v1::BACKFILL_VIEW_BASIC));
      if (Checkpointed(b) > done_at_start) {
        resumed = absl::ToDoubleSeconds(absl::Now() - served);
        break;
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
    // Resumed: the rest of the job would only repeat the first job's
    // figures, so it is cancelled (the time that takes is printed).
    const int64_t done_before_cancel = Checkpointed(
        daemon->client().Get(id, v1::BACKFILL_VIEW_BASIC).value_or(b0));
    const absl::Time cancel_sent = absl::Now();
    RETURN_IF_ERROR(daemon->client().Cancel(id, "bench: resumed").status());
    v1::Backfill finished;
    RETURN_IF_ERROR(daemon->client().Watch(
        id,
        [&finished](const v1::Backfill& update) {
          finished = update;
          return true;
        },
        v1::BACKFILL_VIEW_BASIC));
    const double cancel_seconds =
        absl::ToDoubleSeconds(absl::Now() - cancel_sent);
    ASSIGN_OR_RETURN(ProcessSample second_peak, daemon->Sample());
    daemon->Stop();
    if (finished.state() != v1::BACKFILL_STATE_CANCELLED) {
      return absl::InternalError(
          absl::StrCat("job ", id, " ended ", StateName(finished.state()),
                       " after its cancel, not cancelled"));
    }
    rows_->push_back(
        {absl::StrCat("restart of the daemon (kill -9) with a ", Count(n_),
                      "-partition job a tenth done (", Count(2 * n_),
                      " task rows in state.db)"),
         "< 2 s to serving",
         absl::StrFormat(
             "killed after %s+ checkpointed (%s after the submit), %s on "
             "restart; next checkpoint %s after serving; then cancelled with "
             "%s checkpointed, which took %s; peak RSS %s before the kill, %s "
             "after the restart",
             Count(done_before), Sec(absl::ToDoubleSeconds(killed - sent)),
             Count(done_at_start),
             resumed >= 0 ? Sec(resumed) : "(none in 5 min)",
             Count(done_before_cancel), Sec(cancel_seconds),
             Mb(first_peak.peak_rss_kb), Mb(second_peak.peak_rss_kb)),
         Sec(serving), serving < 2.0 && resumed >= 0});
    return absl::OkStatus();
  }

  void Log(const std::string& what) const {
    std::fprintf(stderr, "backfill_perf: %s\n", what.c_str());
  }

  const MillionBenchOptions& options_;
  std::vector<Row>* const rows_;
  const int64_t n_;
  const fs::path data_;
};

}  // namespace

absl::Status AddMillionRows(const MillionBenchOptions& options,
                            std::vector<Row>* rows) {
  return MillionBench(options, rows).Run();
}

}  // namespace backfill::bench
