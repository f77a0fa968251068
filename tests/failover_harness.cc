// backfill_failover_harness: runs three backfilld replicas as a group over
// a PostgreSQL state store and a PostgreSQL warehouse (leases of 2 s, two
// workers each), disturbs them while they run correction backfills, and
// proves with plain SQL over the raw tables, a snapshot, the state store and
// the warehouse's own records that every job succeeded once and that no
// write of a replica that had lost its lease was accepted.
//
// A group (failover_harness_processes.h) is two databases on the test
// server (StartOrShare: the ctest run's shared server, or one of its own),
// generated raw tables, the revenue pipeline (daily_revenue and its monthly
// rollup, slowed down by a spin) and the replicas r1..r3, loaded once over
// every day. Up to --batch trials run on one group; a failed trial ends it.
//
// A trial:
//   1. plans one job, or two over disjoint months, each over a few weeks;
//      corrects the raw orders of their days with plain UPDATEs (every row
//      of every partition of the jobs changes) and snapshots what is
//      published;
//   2. submits the jobs with idempotency keys through a replica and
//      disturbs the group with one of (chosen at random, seeded):
//        kill-random       kill -9 of a random replica at a random moment;
//        kill-in-publish   kill -9 of the holder of the job's lease while it
//                          publishes: BACKFILL_TEST_CRASH_AT=
//                          publish.before_record armed on the replica the
//                          job is submitted through, or job_leases.step
//                          polled until it says `publish`;
//        kill-in-takeover  kill -9 of the holder, then of the replica that
//                          takes the job over as soon as its token rose;
//        stop-holder       SIGSTOP of the holder (in step run, or validate
//                          or publish), until another replica took the job
//                          over; then SIGCONT, and it runs on;
//        drain-holder      SIGTERM of the holder mid-run (it must drain and
//                          exit 0);
//      and restarts every replica that died (same name, same data dir);
//   3. waits until every job is terminal (backfillctl status, 120 s), and
//      submits each key again through another replica: the same job.
// Then it checks, never through backfilld: every job SUCCEEDED, one job per
// key; every partition of the jobs is the new version (plain SQL over the
// raw tables) and every other equals the snapshot; lineage has exactly one
// record per partition of a job and none elsewhere, the warehouse one
// publication marker per job; the job's audit trail is one chain (each
// event starts where the one before ended), with no transition twice but
// those a retry repeats, one SUCCEEDED and one publish. Refused writes of
// fenced replicas (LEASE_LOST) in the replicas' logs are counted: they are
// the fence working.
//
// Prints a line per trial, a table per disturbance (trials, passed, failed,
// disturbances that landed as planned, takeovers, median and maximum time
// from the disturbance to the job's next claim by another replica, refused
// writes) and "N passed, N failed"; exits 1 on any failure, keeping the
// failed trial's group (logs, data dirs, databases).

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/failover_harness_model.h"
#include "tests/failover_harness_processes.h"
#include "tests/failover_harness_trial.h"
#include "tests/testing/e2e_support.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill {
namespace failover {
namespace {

namespace fs = std::filesystem;

// The postmaster of a server of the harness's own, stopped (SIGQUIT: an
// immediate shutdown) if the harness is told to stop.
volatile sig_atomic_t postmaster = 0;

void OnSignal(int sig) {
  if (postmaster > 0) kill(static_cast<pid_t>(postmaster), SIGQUIT);
  OnStopSignal(sig);
}

}  // namespace

std::optional<Lease> Trial::LeaseOf(const std::string& id) {
  std::optional<Rows> rows = group_.state().Query(
      "SELECT node, token, step, claimed_at FROM backfill_state.job_leases "
      "WHERE job_id = $1",
      {id});
  if (!rows || rows->empty()) return std::nullopt;
  Lease l;
  l.node = (*rows)[0][0];
  l.step = (*rows)[0][2];
  if (!absl::SimpleAtoi((*rows)[0][1], &l.token) ||
      !absl::SimpleAtoi((*rows)[0][3], &l.claimed_at)) {
    return std::nullopt;
  }
  return l;
}

std::string Trial::StateOf(const std::string& id) {
  std::optional<Rows> rows = group_.state().Query(
      "SELECT state FROM backfill_state.jobs WHERE id = $1", {id});
  return rows && rows->size() == 1 ? (*rows)[0][0] : "";
}

std::optional<Lease> Trial::WaitRunning(const std::string& id, int64_t staged) {
  const auto deadline = Clock::now() + seconds(60);
  while (Clock::now() < deadline) {
    std::optional<Lease> lease = LeaseOf(id);
    if (IsTerminal(StateOf(id))) return std::nullopt;
    const std::optional<int64_t> n = group_.state().Count(
        "SELECT COUNT(*) FROM backfill_state.tasks WHERE job_id = $1 AND "
        "dataset = 'daily_revenue' AND state <> 'PENDING' AND state <> "
        "'RUNNING'",
        {id});
    if (lease && !lease->node.empty() &&
        ((n && *n >= staged) || (lease->step != "run" && !lease->step.empty())))
      return lease;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return std::nullopt;
}

std::optional<Lease> Trial::WaitStep(const std::string& id,
                                     const std::set<std::string>& steps,
                                     const std::string& state) {
  const auto deadline = Clock::now() + seconds(60);
  while (Clock::now() < deadline) {
    const std::string now = StateOf(id);
    std::optional<Lease> lease = LeaseOf(id);
    if (lease && !lease->node.empty() &&
        (steps.count(lease->step) || now == state)) {
      if (now == state) lease->step = absl::StrCat(lease->step, "/", state);
      return lease;
    }
    if (IsTerminal(now)) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return std::nullopt;
}

std::optional<Lease> Trial::WaitClaim(const std::string& id, int64_t token,
                                      const std::set<std::string>& excluded,
                                      seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    std::optional<Lease> lease = LeaseOf(id);
    if (lease && lease->token > token && !lease->node.empty() &&
        !excluded.count(lease->node)) {
      return lease;
    }
    if (IsTerminal(StateOf(id))) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return std::nullopt;
}

void Trial::Claimed(const std::optional<Lease>& claim, int64_t since) {
  if (!claim) {
    Note("no other replica claimed the job afterwards");
    return;
  }
  result_.takeover = true;
  result_.claim_seconds = static_cast<double>(claim->claimed_at - since) / 1e6;
  Note(absl::StrFormat("%s claimed it (token %d) %.2f s after", claim->node,
                       claim->token, result_.claim_seconds));
}

void Trial::Plan() {
  const int count = Uniform(0, 2) == 0 ? 2 : 1;
  if (count == 1) {
    const int len = Uniform(14, 35);
    const int first = Uniform(0, kDays - len);
    jobs_.push_back(JobPlan{});
    jobs_.back().first = first;
    jobs_.back().end = first + len;
  } else {
    // January and February, March and April: disjoint months.
    for (const auto& [lo, hi] : {std::pair(0, 59), std::pair(59, kDays)}) {
      const int len = Uniform(10, 25);
      const int first = Uniform(lo, hi - len);
      jobs_.push_back(JobPlan{});
      jobs_.back().first = first;
      jobs_.back().end = first + len;
    }
  }
  for (size_t j = 0; j < jobs_.size(); ++j) {
    JobPlan& job = jobs_[j];
    job.key = absl::StrCat("failover-", number_, "-", j, "-", rng_() % 1000000);
    for (int d = job.first; d < job.end; ++d) {
      job.partitions.insert({"daily_revenue", Day(d)});
      job.partitions.insert({"monthly_revenue", Day(d).substr(0, 7)});
    }
  }
}

bool Trial::CorrectAndSnapshot() {
  Pg& wh = group_.wh();
  std::optional<Contents> old = ReadContents(wh, &DatasetModel::published_sql);
  if (!old) {
    Fail(kOther, absl::StrCat("reading the snapshot: ", wh.error()));
    return false;
  }
  old_ = *std::move(old);
  // Every corrected order earns 1 to 5 more and some lose their refund, so
  // that every partition of the jobs changes.
  const int mod = Uniform(3, 7);
  const int rest = Uniform(0, mod - 1);
  std::string sql = "BEGIN;";
  for (const JobPlan& job : jobs_) {
    const std::string in =
        absl::StrCat("order_date >= '", Day(job.first), "' AND order_date < '",
                     Day(job.end), "'");
    absl::StrAppend(
        &sql,
        "UPDATE raw_orders SET amount = amount + 1 + (order_id % 5) "
        "WHERE ",
        in, "; UPDATE raw_orders SET refund = 0 WHERE ", in, " AND order_id % ",
        mod, " = ", rest, ";");
  }
  if (!wh.Exec(sql + "COMMIT")) {
    Fail(kOther, absl::StrCat("correcting: ", wh.error()));
    return false;
  }
  std::optional<Contents> fresh =
      ReadContents(wh, &DatasetModel::recompute_sql);
  if (!fresh) {
    Fail(kOther, absl::StrCat("recomputing: ", wh.error()));
    return false;
  }
  new_ = *std::move(fresh);
  for (const JobPlan& job : jobs_) {
    for (const Key& key : job.partitions) {
      if (RowsOf(old_, key) == RowsOf(new_, key)) {
        Fail(kOther,
             absl::StrCat("the correction left ", KeyName(key), " unchanged"));
      }
    }
  }
  return result_.findings.ok();
}

// Submits `job` through replica `via`, then through others, up to three
// times in all with the same key; whether it was acknowledged.
bool Trial::Submit(JobPlan& job, int via) {
  for (int attempt = 0; attempt < 3 && via >= 0; ++attempt) {
    RunResult r = R(via).daemon().CtlJson(
        {"submit", "daily_revenue", "--from", Day(job.first), "--to",
         Day(job.end), "--reason", kReason, "--idempotency-key", job.key},
        seconds(60));
    const std::string id = e2e::JsonString(r.out, "id");
    if (r.exit_code == 0 && !id.empty()) {
      job.id = id;
      job.via = via;
      return true;
    }
    Note(absl::StrCat("submit through ", R(via).name(), " not acknowledged (",
                      r.exit_code, "): ", Tail(r.err, 2)));
    via = Serving(via);
  }
  Fail(kOther,
       absl::StrCat("the submit of ", job.key, " was never acknowledged"));
  return false;
}

void Trial::KillRandom() {
  const int via = Uniform(0, kReplicas - 1);
  const int victim = Uniform(0, kReplicas - 1);
  const int delay_ms =
      Uniform(0, static_cast<int>(expected_job_seconds_ * 1000));
  for (JobPlan& job : jobs_) {
    if (!Submit(job, via)) return;
  }
  std::this_thread::sleep_for(milliseconds(delay_ms));
  const std::optional<Lease> before = LeaseOf(jobs_[0].id);
  const int64_t at = NowMicros();
  KillReplica(victim);
  const bool held = before && before->node == R(victim).name();
  result_.landed = true;
  Note(absl::StrCat(
      "killed ", R(victim).name(), " ", delay_ms, " ms after the submit; ",
      held ? absl::StrCat("it held the job in step ", before->step)
           : absl::StrCat("the job was held by ",
                          before && !before->node.empty()
                              ? before->node
                              : "nobody (ended, or between holders)")));
  if (held) {
    Claimed(
        WaitClaim(jobs_[0].id, before->token, {R(victim).name()}, seconds(15)),
        at);
  }
}

void Trial::KillInPublish() {
  int via = Uniform(0, kReplicas - 1);
  const bool armed = Uniform(0, 3) != 0;
  if (armed) {
    // Restarted with the crash point armed: it dies in its first publish,
    // committed in the warehouse and not yet recorded.
    R(via).Signal(SIGTERM);
    const int code = R(via).Reap(seconds(90));
    if (code != 0) {
      Fail(kExit, absl::StrCat(R(via).name(), " exited with ", code,
                               " on SIGTERM (idle), expected 0"));
    }
    std::string error;
    if (!R(via).Start(kPublishPoint, &error)) {
      Fail(kExit, error);
      down_.insert(via);
      return;
    }
    armed_ = via;
  }
  for (JobPlan& job : jobs_) {
    if (!Submit(job, via)) return;
  }
  const std::string& id = jobs_[0].id;
  if (armed) {
    const auto deadline = Clock::now() + seconds(60);
    bool died = false;
    std::optional<Lease> held;
    while (Clock::now() < deadline && !died) {
      died = HasExited(R(via).pid());
      if (!died) {
        held = LeaseOf(id);
        bool ended = true;
        for (const JobPlan& job : jobs_)
          ended = ended && IsTerminal(StateOf(job.id));
        if (ended) break;
        std::this_thread::sleep_for(milliseconds(5));
      }
    }
    const int64_t at = NowMicros();
    if (!died) {
      Note(absl::StrCat(R(via).name(), " armed at ", kPublishPoint,
                        " did not die"));
      return;
    }
    const int code = R(via).Reap();
    down_.insert(via);
    armed_ = -1;
    result_.landed = code == 128 + SIGKILL;
    Note(absl::StrCat(R(via).name(), " died at ", kPublishPoint, " (exit ",
                      code, ")"));
    if (code != 128 + SIGKILL) {
      Fail(kExit, absl::StrCat(R(via).name(), " exited with ", code,
                               ", expected death at ", kPublishPoint));
    }
    const std::optional<Lease> now = LeaseOf(id);
    const int64_t token = now && now->node == R(via).name()
                              ? now->token
                              : (held ? held->token : 0);
    Claimed(WaitClaim(id, token, {R(via).name()}, seconds(15)), at);
    return;
  }
  const std::optional<Lease> lease = WaitStep(id, {"publish"}, "PUBLISHING");
  if (!lease || IndexOf(lease->node) < 0) {
    Note("the job was never seen in step publish: nothing killed");
    return;
  }
  const int holder = IndexOf(lease->node);
  const int64_t at = NowMicros();
  KillReplica(holder);
  result_.landed = true;
  Note(absl::StrCat("killed ", lease->node, " in step publish (token ",
                    lease->token, ")"));
  Claimed(WaitClaim(id, lease->token, {lease->node}, seconds(15)), at);
}

void Trial::KillInTakeover() {
  for (JobPlan& job : jobs_) {
    if (!Submit(job, Uniform(0, kReplicas - 1))) return;
  }
  const std::string& id = jobs_[0].id;
  const std::optional<Lease> first = WaitRunning(
      id, Uniform(1, static_cast<int>(jobs_[0].end - jobs_[0].first) / 2));
  if (!first || IndexOf(first->node) < 0) {
    Note("the job ended before it could be disturbed");
    return;
  }
  KillReplica(IndexOf(first->node));
  const std::optional<Lease> taker =
      WaitClaim(id, first->token, {first->node}, seconds(15));
  if (!taker || IndexOf(taker->node) < 0) {
    Note(absl::StrCat("killed ", first->node, " in step ", first->step,
                      "; nobody took the job over"));
    return;
  }
  const int64_t at = NowMicros();
  KillReplica(IndexOf(taker->node));
  result_.landed = true;
  Note(absl::StrCat("killed ", first->node, " in step ", first->step, ", then ",
                    taker->node, " as it took over (token ", taker->token,
                    ")"));
  Claimed(WaitClaim(id, taker->token, {first->node, taker->node}, seconds(15)),
          at);
}

void Trial::StopHolder() {
  for (JobPlan& job : jobs_) {
    if (!Submit(job, Uniform(0, kReplicas - 1))) return;
  }
  const std::string& id = jobs_[0].id;
  const bool late = Uniform(0, 1) == 0;
  const std::optional<Lease> lease =
      late ? WaitStep(id, {"validate", "publish"}, "PUBLISHING")
           : WaitRunning(id, Uniform(1, (jobs_[0].end - jobs_[0].first) / 2));
  if (!lease || IndexOf(lease->node) < 0) {
    Note("the job ended before it could be disturbed");
    return;
  }
  const int holder = IndexOf(lease->node);
  const int64_t at = NowMicros();
  R(holder).Signal(SIGSTOP);
  for (const char* step : {"run", "validate", "publish", "PUBLISHING"}) {
    result_.landed = result_.landed || absl::StrContains(lease->step, step);
  }
  Note(absl::StrCat("stopped ", lease->node, " in step ", lease->step,
                    " (token ", lease->token, ")"));
  const std::optional<Lease> claim =
      WaitClaim(id, lease->token, {lease->node}, seconds(15));
  if (!claim) NoteWaits();
  Claimed(claim, at);
  R(holder).Signal(SIGCONT);
}

void Trial::DrainHolder() {
  for (JobPlan& job : jobs_) {
    if (!Submit(job, Uniform(0, kReplicas - 1))) return;
  }
  const std::string& id = jobs_[0].id;
  const std::optional<Lease> lease =
      WaitRunning(id, Uniform(1, (jobs_[0].end - jobs_[0].first) / 2));
  if (!lease || IndexOf(lease->node) < 0) {
    Note("the job ended before it could be disturbed");
    return;
  }
  const int holder = IndexOf(lease->node);
  const int64_t at = NowMicros();
  R(holder).Signal(SIGTERM);
  result_.landed = lease->step == "run";
  Note(absl::StrCat("SIGTERM to ", lease->node, " in step ", lease->step,
                    " (token ", lease->token, ")"));
  Claimed(WaitClaim(id, lease->token, {lease->node}, seconds(30)), at);
  const int code = R(holder).Reap(seconds(90));
  down_.insert(holder);
  if (code != 0) {
    Fail(kExit, absl::StrCat(lease->node, " exited with ", code,
                             " after SIGTERM, expected 0 (a drain)"));
    if (code < 0) R(holder).Kill();
  }
}

void Trial::Disturb() {
  submitted_ = Clock::now();
  switch (kind_) {
    case kKillRandom:
      KillRandom();
      break;
    case kKillInPublish:
      KillInPublish();
      break;
    case kKillInTakeover:
      KillInTakeover();
      break;
    case kStopHolder:
      StopHolder();
      break;
    case kDrainHolder:
      DrainHolder();
      break;
    default:
      break;
  }
}

// Restarts every replica that is down, reporting those that died unasked;
// one left armed is restarted without the crash point.
void Trial::RestartDown() {
  for (int i = 0; i < kReplicas; ++i) {
    Replica& r = R(i);
    if (r.stopped()) r.Signal(SIGCONT);
    bool restart = false;
    if (r.pid() > 0 && HasExited(r.pid())) {
      const int code = r.Reap();
      if (!down_.count(i)) {
        Fail(kExit,
             absl::StrCat(r.name(), " died unasked (exit ", code, "):\n",
                          Tail(ReadFile(r.log()).substr(log_offsets_[i]), 12)));
      }
      restart = true;
    } else if (r.pid() <= 0) {
      restart = true;
    } else if (i == armed_) {
      r.Signal(SIGTERM);
      if (r.Reap(seconds(90)) < 0) r.Kill();
      restart = true;
    }
    if (restart) {
      std::string error;
      if (!r.Start("", &error))
        Fail(kExit, absl::StrCat("restarting: ", error));
    }
  }
  armed_ = -1;
}

TrialResult Trial::Run() {
  for (int i = 0; i < kReplicas; ++i) {
    log_offsets_[i] = ReadFile(R(i).log()).size();
  }
  Plan();
  std::vector<std::string> ranges;
  for (const JobPlan& job : jobs_) {
    ranges.push_back(absl::StrCat(Day(job.first), "..", Day(job.end)));
  }
  if (CorrectAndSnapshot()) {
    Disturb();
    RestartDown();
    WaitTerminal();
    Resubmit();
    Check();
  } else {
    RestartDown();
  }
  CountRefusals();
  std::vector<std::string> ids;
  for (const JobPlan& job : jobs_) ids.push_back(job.id);
  result_.summary =
      absl::StrCat(absl::StrJoin(ids, ","), " ", absl::StrJoin(ranges, ","));
  if (!result_.findings.ok()) DumpState();
  return result_;
}

// --- The run -----------------------------------------------------------------

namespace {

struct KindTotals {
  int trials = 0;
  int passed = 0;
  int failed = 0;
  int landed = 0;
  int takeovers = 0;
  int refusals = 0;
  std::vector<double> claims;
  int count[kCategories] = {};
};

void PrintFailure(int number, Group* group, const TrialResult& r,
                  const size_t* offsets) {
  std::printf("---- FAILED: trial %d, kept in %s\n", number,
              group ? group->dir().c_str() : "?");
  for (const std::string& n : r.notes) std::printf("  . %s\n", n.c_str());
  for (const std::string& d : r.findings.details) {
    std::printf("  ! %s\n", d.c_str());
  }
  if (group != nullptr) {
    for (int i = 0; i < kReplicas; ++i) {
      const std::string log = ReadFile(group->replica(i).log());
      const std::string slice = log.substr(std::min(offsets[i], log.size()));
      std::printf("  -- %s, the trial's warnings and errors (last 20):\n",
                  group->replica(i).log().c_str());
      std::vector<std::string> lines;
      for (absl::string_view line : absl::StrSplit(slice, '\n')) {
        if (absl::StrContains(line, "[warn") ||
            absl::StrContains(line, "[error") ||
            absl::StrContains(line, "[critical")) {
          lines.emplace_back(line);
        }
      }
      std::istringstream tail(Tail(absl::StrJoin(lines, "\n"), 20));
      std::string line;
      while (std::getline(tail, line)) std::printf("     %s\n", line.c_str());
    }
  }
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  const Options options = ParseFlags(argc, argv);
  e2e::SetBinDir(options.bin_dir);
  for (const char* bin : {"backfilld", "backfillctl"}) {
    if (!fs::exists(e2e::Bin(bin))) {
      std::fprintf(stderr,
                   "backfill_failover_harness: %s not found (--bin-dir)\n",
                   e2e::Bin(bin).c_str());
      return 2;
    }
  }
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  signal(SIGHUP, OnSignal);

  const char* tmp = std::getenv("TMPDIR");
  std::string root =
      absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/backfill-failover-XXXXXX");
  if (mkdtemp(root.data()) == nullptr) {
    std::perror("mkdtemp");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<::backfill::testing::PostgresTestServer>>
      server = ::backfill::testing::PostgresTestServer::StartOrShare();
  if (!server.ok()) {
    std::fprintf(stderr, "backfill_failover_harness: no PostgreSQL: %s\n",
                 server.status().ToString().c_str());
    fs::remove_all(root);
    return 2;
  }
  if (!(*server)->shared()) {
    int pid = 0;
    std::istringstream pidfile(
        ReadFile((*server)->dir() + "/data/postmaster.pid"));
    if (pidfile >> pid) postmaster = pid;
  }
  std::vector<std::string> kinds;
  for (int k : options.kinds) kinds.push_back(kKindNames[k]);
  std::printf(
      "backfill_failover_harness: %d trial(s), disturbances %s, seed %llu, "
      "%d replicas (--lease-seconds %d, --workers %d), %d trials per group, "
      "in %s\n",
      options.trials, absl::StrJoin(kinds, ",").c_str(),
      static_cast<unsigned long long>(options.seed), kReplicas, kLeaseSeconds,
      options.workers, options.batch, root.c_str());
  std::fflush(stdout);

  const auto started = Clock::now();
  KindTotals totals[kKinds];
  int passed = 0, failed = 0, groups = 0, in_group = 0;
  bool kept = options.keep;
  std::vector<double> job_seconds;
  std::unique_ptr<Group> group;
  auto retire = [&] {
    if (!group) return;
    const std::string dir = group->dir();
    const bool keep_dir = options.keep || group->kept();
    group.reset();
    if (!keep_dir) {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  };
  for (int t = 1; t <= options.trials; ++t) {
    std::seed_seq seq{static_cast<uint32_t>(options.seed),
                      static_cast<uint32_t>(options.seed >> 32),
                      static_cast<uint32_t>(t)};
    std::mt19937_64 rng(seq);
    const Kind kind =
        static_cast<Kind>(options.kinds[std::uniform_int_distribution<size_t>(
            0, options.kinds.size() - 1)(rng)]);
    KindTotals& k = totals[kind];
    ++k.trials;
    const auto t0 = Clock::now();
    if (group && in_group >= options.batch) retire();
    if (!group) {
      ++groups;
      in_group = 0;
      group = std::make_unique<Group>(options, server->get(),
                                      absl::StrCat(root, "/group-", groups),
                                      groups);
      std::string error;
      if (!group->Create(&error)) {
        ++failed;
        ++k.failed;
        ++k.count[kOther];
        kept = true;
        group->Keep();
        std::printf("---- FAILED: trial %d: group %d did not start: %s\n", t,
                    groups, error.c_str());
        std::fflush(stdout);
        retire();
        continue;
      }
    }
    ++in_group;
    size_t offsets[kReplicas];
    for (int i = 0; i < kReplicas; ++i) {
      offsets[i] = ReadFile(group->replica(i).log()).size();
    }
    const double expected =
        job_seconds.empty() ? 2.0 : MedianMax(job_seconds).first;
    Trial trial(*group, t, kind, std::move(rng), expected);
    const TrialResult r = trial.Run();
    const double took =
        std::chrono::duration<double>(Clock::now() - t0).count();
    const bool ok = r.findings.ok();
    if (ok && r.job_seconds > 0 && !r.takeover) {
      job_seconds.push_back(r.job_seconds);
    }
    k.landed += r.landed;
    k.takeovers += r.takeover;
    k.refusals += r.refusals;
    if (r.takeover) k.claims.push_back(r.claim_seconds);
    for (int c = 0; c < kCategories; ++c) k.count[c] += r.findings.count[c];
    std::string first_note = r.notes.empty() ? "" : r.notes.front();
    for (const std::string& n : r.notes) {
      if (absl::StrContains(n, "claimed it") ||
          absl::StrContains(n, " session ")) {
        first_note += "; " + n;
      }
    }
    std::printf("trial %4d  %-16s %s  %5.1fs  %s; %s\n", t, kKindNames[kind],
                ok ? "pass" : "FAIL", took, r.summary.c_str(),
                first_note.c_str());
    std::fflush(stdout);
    if (ok) {
      ++passed;
      ++k.passed;
    } else {
      ++failed;
      ++k.failed;
      kept = true;
      group->Keep();
      PrintFailure(t, group.get(), r, offsets);
      retire();
    }
  }
  retire();

  std::printf("\n%-17s %6s %6s %6s %6s %9s %10s %10s %8s\n", "disturbance",
              "trials", "passed", "failed", "landed", "takeovers", "claim-med",
              "claim-max", "refusals");
  KindTotals all;
  for (int kind : options.kinds) {
    const KindTotals& k = totals[kind];
    const auto [median, max] = MedianMax(k.claims);
    std::printf("%-17s %6d %6d %6d %6d %9d %9.2fs %9.2fs %8d\n",
                kKindNames[kind], k.trials, k.passed, k.failed, k.landed,
                k.takeovers, median, max, k.refusals);
    all.trials += k.trials;
    all.passed += k.passed;
    all.failed += k.failed;
    all.landed += k.landed;
    all.takeovers += k.takeovers;
    all.refusals += k.refusals;
    all.claims.insert(all.claims.end(), k.claims.begin(), k.claims.end());
    for (int c = 0; c < kCategories; ++c) all.count[c] += k.count[c];
  }
  const auto [median, max] = MedianMax(all.claims);
  std::printf("%-17s %6d %6d %6d %6d %9d %9.2fs %9.2fs %8d\n", "total",
              all.trials, all.passed, all.failed, all.landed, all.takeovers,
              median, max, all.refusals);
  std::vector<std::string> found;
  for (int c = 0; c < kCategories; ++c) {
    if (all.count[c] > 0) {
      found.push_back(absl::StrCat(all.count[c], " ", kCategoryNames[c]));
    }
  }
  if (!found.empty())
    std::printf("findings: %s\n", absl::StrJoin(found, ", ").c_str());
  const double secs =
      std::chrono::duration<double>(Clock::now() - started).count();
  std::printf("\n%.0f s (%.1f s per trial), %d group(s); seed %llu\n", secs,
              secs / options.trials, groups,
              static_cast<unsigned long long>(options.seed));
  if (kept) {
    std::printf("kept %s\n", root.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  std::fflush(stdout);
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace failover
}  // namespace backfill

int main(int argc, char** argv) { return backfill::failover::Main(argc, argv); }
