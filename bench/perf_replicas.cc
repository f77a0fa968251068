#include "bench/perf_replicas.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.pb.h"
#include "bench/perf_daemon.h"
#include "bench/perf_fixtures.h"
#include "bench/perf_process.h"
#include "core/base/status_macros.h"
#include "storage/postgres/pg_connection.h"
#include "tests/testing/postgres_test_server.h"

namespace backfill::bench {
namespace {

namespace fs = std::filesystem;
using postgres::PgConnection;
using postgres::PgResult;

// On a PostgreSQL warehouse the trivial job runs at a few hundred
// partitions per second on 2 cores (the server spends milliseconds of CPU
// on each partition's statements), so the jobs here have 4,000 partitions,
// not the partitions rows' 100,000: the rows compare the state stores and
// groups of replicas with each other, which needs the same jobs, not large
// ones.
struct ReplicaSizes {
  int64_t hours = 4'000;           // each throughput job
  int64_t failover_hours = 5'000;  // each job a failover interrupts
  int kills = 3;                   // failovers per lease time
  std::vector<int> lease_seconds = {2, 10};
};

ReplicaSizes QuickReplicaSizes() {
  ReplicaSizes s;
  s.hours = 200;
  s.failover_hours = 1'000;
  s.kills = 2;
  s.lease_seconds = {2};
  return s;
}

// A task whose partition is recomputed and checkpointed (or published).
constexpr char kCheckpointed[] =
    "('STAGED', 'PUBLISHED', 'UNCHANGED', 'SKIPPED')";
constexpr absl::Duration kPoll = absl::Milliseconds(10);

void Note(const std::string& what) {
  std::fprintf(stderr, "backfill_perf: %s\n", what.c_str());
}

// The k-th range of n hours from 2000-01-01T00 (ranges of one n never
// share a partition).
v1::BackfillRequest Hours(int64_t k, int64_t n) {
  const absl::CivilHour start(2000, 1, 1, 0);
  auto hour = [](absl::CivilHour h) {
    return absl::FormatCivilTime(h).substr(0, 13);
  };
  v1::BackfillRequest r;
  r.set_dataset("hourly_ticks");
  r.set_from_partition(hour(start + k * n));
  r.set_to_partition(hour(start + (k + 1) * n));
  r.set_reason(
      absl::StrCat("bench: ", Count(static_cast<double>(n)), " hours"));
  return r;
}

bool Ended(v1::BackfillState s) {
  return s == v1::BACKFILL_STATE_SUCCEEDED || s == v1::BACKFILL_STATE_FAILED ||
         s == v1::BACKFILL_STATE_CANCELLED ||
         s == v1::BACKFILL_STATE_ROLLED_BACK ||
         s == v1::BACKFILL_STATE_VALIDATION_FAILED;
}

// Watches job `id` until it ends; an error unless it SUCCEEDED.
absl::Status WaitSucceeded(BackfillClient& client, const std::string& id) {
  v1::Backfill last;
  RETURN_IF_ERROR(client.Watch(
      id,
      [&last](const v1::Backfill& update) {
        last = update;
        return true;
      },
      v1::BACKFILL_VIEW_BASIC));
  if (last.state() != v1::BACKFILL_STATE_SUCCEEDED) {
    return absl::AbortedError(absl::StrCat("job ", id, " ended ",
                                           v1::BackfillState_Name(last.state()),
                                           ": ", last.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Int(const PgResult& r, size_t row, size_t col) {
  int64_t v = 0;
  if (r.rows.size() <= row || r.rows[row].size() <= col ||
      !r.rows[row][col].has_value() ||
      !absl::SimpleAtoi(*r.rows[row][col], &v)) {
    return absl::InternalError("unexpected answer from the state store");
  }
  return v;
}

// Replicas started on one state store: a group sharing
// backfill_state in PostgreSQL, or one replica with state.db.
struct Group {
  std::string state_dsn;               // "": state.db in the data dir
  std::vector<DaemonOptions> options;  // each replica's, to start it again
  std::vector<std::string> nodes;      // each replica's --node-name
  std::vector<std::unique_ptr<BenchDaemon>> replicas;  // null: killed
  std::unique_ptr<PgConnection> state;  // reads the state store's tables

  int IndexOf(const std::string& node) const {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i] == node) return static_cast<int>(i);
    }
    return -1;
  }
  double Cpu() const {
    double cpu = 0;
    for (const auto& r : replicas) {
      if (r == nullptr) continue;
      absl::StatusOr<ProcessSample> s = r->Sample();
      if (s.ok()) cpu += s->cpu_seconds;
    }
    return cpu;
  }
  void Stop() {
    for (auto& r : replicas) {
      if (r != nullptr) r->Stop();
      r.reset();
    }
  }
};

// Jobs run at once on a group.
struct JobsRun {
  int64_t partitions = 0;
  double wall_seconds = 0;        // the first submit to the last job's end
  double cpu_seconds = 0;         // every replica of the group, over that span
  double server_cpu_seconds = 0;  // PostgreSQL's, over that span
  std::vector<std::string> holders;  // per job: the replica that ran it
  int64_t peak_rss_kb = 0;           // the largest of those replicas' (VmHWM)
};

// One failover.
struct Failover {
  int64_t done_at_kill = 0;       // partitions checkpointed before the kill
  double claim_seconds = 0;       // the kill to another replica's claim
  double checkpoint_seconds = 0;  // the kill to the next checkpoint
};

class ReplicaBench {
 public:
  explicit ReplicaBench(const ReplicaBenchOptions& options)
      : options_(options),
        sizes_(options.quick ? QuickReplicaSizes() : ReplicaSizes()) {}

  absl::Status Run(std::vector<Row>* rows) {
    Note("starting a PostgreSQL server");
    ASSIGN_OR_RETURN(server_, testing::PostgresTestServer::Start());
    ASSIGN_OR_RETURN(admin_, PgConnection::Connect(server_->Dsn()));
    std::ifstream pid_file(server_->dir() + "/data/postmaster.pid");
    std::string line;
    std::getline(pid_file, line);
    if (!absl::SimpleAtoi(line, &postmaster_)) {
      return absl::InternalError("the PostgreSQL server wrote no pid");
    }
    RETURN_IF_ERROR(ThroughputRows(rows));
    for (int lease : sizes_.lease_seconds) {
      RETURN_IF_ERROR(FailoverRow(lease, rows));
    }
    return absl::OkStatus();
  }

 private:
  // A new database `name` on the server; its connection string.
  absl::StatusOr<std::string> CreateDatabase(const std::string& name) {
    RETURN_IF_ERROR(admin_->ExecScript(absl::StrCat("CREATE DATABASE ", name)));
    return server_->Dsn(name);
  }

  // Starts `count` replicas in databases `<name>_warehouse` (the trivial
  // pipeline's, with an empty source) and `<name>_state`, or with state.db
  // when not `state_in_postgres`, and runs a job of one partition, outside
  // every range measured, which creates the published table: no measured
  // job pays for creating it.
  absl::StatusOr<std::unique_ptr<Group>> StartGroup(const std::string& name,
                                                    int count,
                                                    bool state_in_postgres,
                                                    int lease_seconds) {
    auto group = std::make_unique<Group>();
    ASSIGN_OR_RETURN(const std::string warehouse_dsn,
                     CreateDatabase(absl::StrCat(name, "_warehouse")));
    {
      ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> conn,
                       PgConnection::Connect(warehouse_dsn));
      RETURN_IF_ERROR(conn->ExecScript(
          "CREATE TABLE ticks (h TEXT, v INTEGER);"
          "CREATE INDEX ticks_h ON ticks (h); ANALYZE ticks;"));
    }
    if (state_in_postgres) {
      ASSIGN_OR_RETURN(group->state_dsn,
                       CreateDatabase(absl::StrCat(name, "_state")));
    }
    const std::string yaml =
        PostgresTrivialHourlyPipelineYaml(warehouse_dsn, "ticks");
    for (int i = 1; i <= count; ++i) {
      const fs::path data = options_.dir / name / absl::StrCat("replica-", i);
      fs::create_directories(data / "pipelines");
      RETURN_IF_ERROR(
          WriteTextFile((data / "pipelines" / "bench.yaml").string(), yaml));
      DaemonOptions o;
      o.binary = options_.backfilld;
      o.data_dir = data.string();
      o.workers = options_.workers;
      const std::string node = absl::StrCat("r", i);
      if (state_in_postgres) {
        o.extra_args = {"--state-dsn",     group->state_dsn,
                        "--node-name",     node,
                        "--lease-seconds", absl::StrCat(lease_seconds)};
      }
      group->options.push_back(o);
      group->nodes.push_back(node);
      // One after the other: the first creates the state store's schema.
      ASSIGN_OR_RETURN(std::unique_ptr<BenchDaemon> daemon,
                       BenchDaemon::Start(o));
      group->replicas.push_back(std::move(daemon));
    }
    if (state_in_postgres) {
      ASSIGN_OR_RETURN(group->state, PgConnection::Connect(group->state_dsn));
    }
    BackfillClient& client = group->replicas[0]->client();
    ASSIGN_OR_RETURN(v1::SubmitBackfillResponse first,
                     client.Submit(Hours(-1, 1), ""));
    RETURN_IF_ERROR(WaitSucceeded(client, first.backfill().id()));
    return group;
  }

  // Submits one job of `n` partitions per element of `on` (the replica to
  // submit it to), the k-th on the k-th range, all at once, and waits until
  // all of them SUCCEEDED.
  absl::StatusOr<JobsRun> RunJobs(Group& g, const std::vector<int>& on,
                                  int64_t n) {
    JobsRun run;
    run.partitions = n * static_cast<int64_t>(on.size());
    const double cpu_before = g.Cpu();
    const double server_before = ProcessTreeCpuSeconds(postmaster_);
    absl::Mutex mu;
    std::vector<std::string> ids(on.size());
    std::vector<absl::Status> errors(on.size());
    std::vector<absl::Time> ends(on.size());
    std::atomic<size_t> finished{0};
    std::vector<std::thread> threads;
    const absl::Time start = absl::Now();
    for (size_t k = 0; k < on.size(); ++k) {
      BackfillClient* client = &g.replicas[on[k]]->client();
      threads.emplace_back([&, k, client] {
        absl::StatusOr<v1::SubmitBackfillResponse> submitted =
            client->Submit(Hours(static_cast<int64_t>(k), n), "");
        if (submitted.ok()) {
          const std::string id = submitted->backfill().id();
          {
            absl::MutexLock lock(&mu);
            ids[k] = id;
          }
          errors[k] = WaitSucceeded(*client, id);
        } else {
          errors[k] = submitted.status();
        }
        ends[k] = absl::Now();
        finished.fetch_add(1);
      });
    }
    // Who runs each job, read from the leases while they run.
    run.holders.assign(on.size(), "");
    if (g.state == nullptr) run.holders.assign(on.size(), g.nodes[0]);
    while (finished.load() < on.size()) {
      if (g.state != nullptr &&
          std::count(run.holders.begin(), run.holders.end(), "") > 0) {
        absl::StatusOr<PgResult> leases = g.state->Exec(
            "SELECT job_id, node FROM backfill_state.job_leases WHERE node "
            "<> ''");
        if (leases.ok()) {
          absl::MutexLock lock(&mu);
          for (const auto& row : leases->rows) {
            for (size_t k = 0; k < on.size(); ++k) {
              if (!ids[k].empty() && row[0] == ids[k] &&
                  run.holders[k].empty()) {
                run.holders[k] = row[1].value_or("");
              }
            }
          }
        }
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    for (std::thread& t : threads) t.join();
    for (const absl::Status& e : errors) RETURN_IF_ERROR(e);
    run.wall_seconds = absl::ToDoubleSeconds(
        *std::max_element(ends.begin(), ends.end()) - start);
    run.cpu_seconds = g.Cpu() - cpu_before;
    run.server_cpu_seconds = ProcessTreeCpuSeconds(postmaster_) - server_before;
    for (const std::string& node : run.holders) {
      const int i = g.IndexOf(node);
      if (i < 0) {
        return absl::InternalError(
            absl::StrCat("no replica was seen holding a job (",
                         absl::StrJoin(ids, ", "), ")"));
      }
      ASSIGN_OR_RETURN(ProcessSample s, g.replicas[i]->Sample());
      run.peak_rss_kb = std::max(run.peak_rss_kb, s.peak_rss_kb);
    }
    return run;
  }

  // A group started for one measure, its jobs run, the group stopped.
  absl::StatusOr<JobsRun> Measure(const std::string& name, int replicas,
                                  bool state_in_postgres,
                                  const std::vector<int>& on) {
    Note(absl::StrCat(name, ": ", on.size(), " job(s) of ",
                      Count(static_cast<double>(sizes_.hours)),
                      " partitions on ", replicas, " replica(s), state in ",
                      state_in_postgres ? "PostgreSQL" : "state.db"));
    ASSIGN_OR_RETURN(std::unique_ptr<Group> g,
                     StartGroup(name, replicas, state_in_postgres,
                                /*lease_seconds=*/10));
    absl::StatusOr<JobsRun> run = RunJobs(*g, on, sizes_.hours);
    g->Stop();
    return run;
  }

  static std::string Rate(const JobsRun& r) {
    return absl::StrFormat("%s partitions/s; %.0f MB",
                           Count(r.partitions / r.wall_seconds),
                           r.peak_rss_kb / 1024.0);
  }
  static std::string Figures(const JobsRun& r) {
    return absl::StrFormat(
        "%s wall; CPU per partition: replicas %.0f us, PostgreSQL %.0f us; "
        "ran on %s",
        Sec(r.wall_seconds), r.cpu_seconds / r.partitions * 1e6,
        r.server_cpu_seconds / r.partitions * 1e6,
        absl::StrJoin(r.holders, ", "));
  }

  absl::Status ThroughputRows(std::vector<Row>* rows) {
    const std::string n = Count(static_cast<double>(sizes_.hours));
    ASSIGN_OR_RETURN(JobsRun sqlite, Measure("one_sqlite", 1, false, {0}));
    ASSIGN_OR_RETURN(JobsRun one, Measure("one_pg", 1, true, {0}));
    ASSIGN_OR_RETURN(JobsRun three, Measure("three_pg", 3, true, {0}));
    ASSIGN_OR_RETURN(JobsRun one_x3, Measure("one_pg_x3", 1, true, {0, 0, 0}));
    ASSIGN_OR_RETURN(JobsRun three_x3,
                     Measure("three_pg_x3", 3, true, {0, 1, 2}));
    const std::string job =
        absl::StrCat(n,
                     "-partition trivial job on a PostgreSQL warehouse, "
                     "submit to SUCCEEDED");
    rows->push_back({absl::StrCat(job, ": one replica, state in state.db"),
                     "(the base of the next rows)", Figures(sqlite),
                     Rate(sqlite), std::nullopt});
    rows->push_back({"the same: one replica, state in PostgreSQL (--state-dsn)",
                     "reported beside state.db", Figures(one), Rate(one),
                     std::nullopt});
    rows->push_back(
        {"the same: three replicas, state in PostgreSQL, submitted on one",
         "about one replica's (a job runs on one replica)", Figures(three),
         Rate(three), std::nullopt});
    rows->push_back({absl::StrCat("three ", n,
                                  "-partition jobs on disjoint partitions "
                                  "submitted at once: one replica, state in "
                                  "PostgreSQL"),
                     "(the base of the next row)", Figures(one_x3),
                     Rate(one_x3), std::nullopt});
    const double one_rate = one_x3.partitions / one_x3.wall_seconds;
    const double three_rate = three_x3.partitions / three_x3.wall_seconds;
    rows->push_back(
        {"the same three jobs: three replicas, one submitted to each",
         "more partitions/s than one replica",
         absl::StrCat(
             Figures(three_x3),
             absl::StrFormat("; %.2fx one replica's", three_rate / one_rate)),
         Rate(three_x3), three_rate > one_rate});
    return absl::OkStatus();
  }

  // The number of tasks of job `id` checkpointed, and the job's lease
  // (node, token; "" and 0 when nobody holds it).
  struct Progress {
    int64_t checkpointed = 0;
    std::string node;
    int64_t token = 0;
  };
  absl::StatusOr<Progress> ReadProgress(Group& g, const std::string& id) {
    ASSIGN_OR_RETURN(
        PgResult r,
        g.state->Exec(
            absl::StrCat(
                "SELECT (SELECT count(*) FROM backfill_state.tasks WHERE "
                "job_id = $1 AND state IN ",
                kCheckpointed,
                "), COALESCE((SELECT node FROM backfill_state.job_leases WHERE "
                "job_id = $1), ''), COALESCE((SELECT token FROM "
                "backfill_state.job_leases WHERE job_id = $1), 0)"),
            {id}));
    Progress p;
    ASSIGN_OR_RETURN(p.checkpointed, Int(r, 0, 0));
    p.node = r.rows[0][1].value_or("");
    ASSIGN_OR_RETURN(p.token, Int(r, 0, 2));
    return p;
  }

  // Submits the k-th job to replica `submit_on`, kills the replica that
  // claims it once some of its partitions are checkpointed, and times the
  // takeover; then cancels the job and starts the killed replica again.
  absl::StatusOr<Failover> FailOver(Group& g, int submit_on, int64_t k,
                                    int lease_seconds) {
    const int64_t n = sizes_.failover_hours;
    ASSIGN_OR_RETURN(v1::SubmitBackfillResponse submitted,
                     g.replicas[submit_on]->client().Submit(Hours(k, n), ""));
    const std::string id = submitted.backfill().id();
    const int64_t kill_at = std::max<int64_t>(1, n / 20);
    Progress p;
    const absl::Time started = absl::Now();
    while (p.node.empty() || p.checkpointed < kill_at) {
      if (absl::Now() - started > absl::Minutes(5)) {
        return absl::DeadlineExceededError(
            absl::StrCat("job ", id, ": ", p.checkpointed,
                         " partitions checkpointed in 5 "
                         "min, holder '",
                         p.node, "'"));
      }
      absl::SleepFor(kPoll);
      ASSIGN_OR_RETURN(p, ReadProgress(g, id));
    }
    if (p.checkpointed >= n) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", id, " was done before its replica was killed"));
    }
    const int holder = g.IndexOf(p.node);
    if (holder < 0 || g.replicas[holder] == nullptr) {
      return absl::InternalError(
          absl::StrCat("job ", id, " held by an unknown replica ", p.node));
    }
    Failover f;
    f.done_at_kill = p.checkpointed;
    const Progress before = p;
    const absl::Time killed = absl::Now();
    g.replicas[holder]->Kill();
    // Claimed again: another node, a new token. Until then, the count of
    // checkpoints the next one is compared with (the killed replica's last
    // commits are in by the time its lease expires).
    int64_t baseline = before.checkpointed;
    while (true) {
      ASSIGN_OR_RETURN(p, ReadProgress(g, id));
      if (!p.node.empty() && p.token != before.token) break;
      baseline = p.checkpointed;
      if (absl::Now() - killed > absl::Seconds(lease_seconds + 60)) {
        return absl::DeadlineExceededError(
            absl::StrCat("job ", id, " not claimed again ", lease_seconds + 60,
                         " s after its replica was killed"));
      }
      absl::SleepFor(kPoll);
    }
    f.claim_seconds = absl::ToDoubleSeconds(absl::Now() - killed);
    const int taker = g.IndexOf(p.node);
    while (p.checkpointed <= baseline) {
      if (absl::Now() - killed > absl::Minutes(3)) {
        return absl::DeadlineExceededError(
            absl::StrCat("job ", id, " taken over by ", p.node,
                         " made no checkpoint in 3 min"));
      }
      absl::SleepFor(kPoll);
      ASSIGN_OR_RETURN(p, ReadProgress(g, id));
    }
    f.checkpoint_seconds = absl::ToDoubleSeconds(absl::Now() - killed);
    if (taker < 0 || g.replicas[taker] == nullptr) {
      return absl::InternalError(
          absl::StrCat("job ", id, " taken over by an unknown replica"));
    }
    // Cancelled (the rest of it measures nothing), and the replica back.
    BackfillClient& client = g.replicas[taker]->client();
    RETURN_IF_ERROR(client.Cancel(id, "bench: failover measured").status());
    while (true) {
      ASSIGN_OR_RETURN(v1::Backfill b, client.Get(id, v1::BACKFILL_VIEW_BASIC));
      if (Ended(b.state())) break;
      if (absl::Now() - killed > absl::Minutes(5)) {
        return absl::DeadlineExceededError(
            absl::StrCat("job ", id, " did not end after its cancel"));
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    g.replicas[holder].reset();
    ASSIGN_OR_RETURN(g.replicas[holder], BenchDaemon::Start(g.options[holder]));
    return f;
  }

  absl::Status FailoverRow(int lease_seconds, std::vector<Row>* rows) {
    Note(absl::StrCat("failover with --lease-seconds ", lease_seconds, ": ",
                      sizes_.kills, " kills"));
    ASSIGN_OR_RETURN(std::unique_ptr<Group> g,
                     StartGroup(absl::StrCat("failover_", lease_seconds), 3,
                                true, lease_seconds));
    std::vector<double> claims, checkpoints;
    std::vector<std::string> claim_text, checkpoint_text;
    int64_t done_min = sizes_.failover_hours, done_max = 0;
    for (int i = 0; i < sizes_.kills; ++i) {
      absl::StatusOr<Failover> f = FailOver(*g, i % 3, i, lease_seconds);
      if (!f.ok()) {
        g->Stop();
        return f.status();
      }
      claims.push_back(f->claim_seconds);
      checkpoints.push_back(f->checkpoint_seconds);
      claim_text.push_back(absl::StrFormat("%.2f", f->claim_seconds));
      checkpoint_text.push_back(absl::StrFormat("%.2f", f->checkpoint_seconds));
      done_min = std::min(done_min, f->done_at_kill);
      done_max = std::max(done_max, f->done_at_kill);
    }
    g->Stop();
    const double goal = lease_seconds + 1.5;
    const double claim_max = *std::max_element(claims.begin(), claims.end());
    const double checkpoint_max =
        *std::max_element(checkpoints.begin(), checkpoints.end());
    rows->push_back(
        {absl::StrFormat("failover, three replicas, --lease-seconds %d: "
                         "SIGKILL of a running job's replica to the job's "
                         "next claim by another (median, max of %d)",
                         lease_seconds, sizes_.kills),
         absl::StrFormat("takeover < %.1f s (lease + 1.5 s)", goal),
         absl::StrFormat(
             "jobs of %s partitions killed after %s-%s checkpointed; claimed "
             "again after %s s; next checkpoint after %s s (median %s, max "
             "%s)",
             Count(static_cast<double>(sizes_.failover_hours)),
             Count(static_cast<double>(done_min)),
             Count(static_cast<double>(done_max)),
             absl::StrJoin(claim_text, ", "),
             absl::StrJoin(checkpoint_text, ", "), Sec(Median(checkpoints)),
             Sec(checkpoint_max)),
         absl::StrFormat("%s, %s", Sec(Median(claims)), Sec(claim_max)),
         claim_max < goal});
    return absl::OkStatus();
  }

  const ReplicaBenchOptions options_;
  const ReplicaSizes sizes_;
  std::unique_ptr<testing::PostgresTestServer> server_;
  std::unique_ptr<PgConnection> admin_;  // creates the databases
  pid_t postmaster_ = 0;
};

}  // namespace

absl::Status AddReplicaRows(const ReplicaBenchOptions& options,
                            std::vector<Row>* rows) {
  ReplicaBench bench(options);
  return bench.Run(rows);
}

}  // namespace backfill::bench
