// backfill_perf: the performance suite. Runs the real daemon (backfilld)
// on generated data and prints, in one markdown table, every goal the
// product claims beside the raw figures it was measured from, all measured
// side by side in one run:
//   - CPU of a full reload through backfilld against the same SQL run
//     directly by sqlite3 (10 million orders over 365 days), with the
//     inputs' fingerprints known (a second full reload) and cold (the
//     first);
//   - wall time of a 30-of-365-day backfill against the full reload;
//   - the cost of fingerprints and checks against the transform's own time
//     (the daemon's backfill_partition_phase_seconds_total), known and
//     cold;
//   - a job of 100,000 hour partitions with a trivial transform: partitions
//     per second end to end, and the daemon's peak resident memory;
//   - the plan of 100,000 partitions, and a 30-day plan over 1 million
//     against 100 million orders;
//   - GetBackfill (BASIC) calls per second with 32 concurrent clients
//     against a bare gRPC echo server answering as many bytes;
//   - a restart over a state store of 1,000,000 partition rows with a job
//     running: time to serving, and to the job's next checkpoint;
//   - replicas (bench/perf_replicas.h): the trivial job on a PostgreSQL
//     warehouse with the state in state.db, in PostgreSQL, and on a group
//     of three replicas; three jobs on one replica and on three; and the
//     time a group takes to take a killed replica's job over;
//   - one-fix (bench/perf_one_fix.h): a one-partition fix from submit to
//     SUCCEEDED, p50 and p99 over jobs one after the other, against the
//     same transform and publish as plain SQL, and where its time goes;
//   - postgres (bench/perf_postgres.h): a full reload on a PostgreSQL
//     warehouse against psql running the same SQL, the trivial job there,
//     one partition replaced by a job, and one of 5 million rows replaced
//     by hand, beside a partition swap (DETACH + ATTACH);
//   - million (bench/perf_million.h): the plan and the job of 1,000,000
//     hour partitions, reads while it runs, and a restart in the middle of
//     another.
// --quick runs every step on small data (for CI: it proves the suite works
// and asserts no timing).
//
// Usage: backfill_perf [--quick] [--only GROUPS] [--bin-dir DIR]
//                      [--work-dir DIR] [--keep]
// --only runs some groups of rows, a comma-separated list of: cost (the
// first six rows), partitions (the 100,000-partition rows: plan, job,
// GetBackfill, restart), plan-size (the 30-day plan against table size),
// replicas (the state store in PostgreSQL and groups of replicas), one-fix
// (one-partition jobs), postgres (a PostgreSQL warehouse against psql),
// million (the 1,000,000-partition rows).

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "bench/perf_daemon.h"
#include "bench/perf_fixtures.h"
#include "bench/perf_history.h"
#include "bench/perf_job_states.h"
#include "bench/perf_million.h"
#include "bench/perf_one_fix.h"
#include "bench/perf_postgres.h"
#include "bench/perf_process.h"
#include "bench/perf_read_probe.h"
#include "bench/perf_replicas.h"
#include "bench/perf_table.h"
#include "bench/rpc_load.h"
#include "core/base/status_macros.h"

#ifndef BACKFILL_BENCH_BUILD_TYPE
#define BACKFILL_BENCH_BUILD_TYPE "unknown"
#endif

namespace backfill::bench {
namespace {

namespace fs = std::filesystem;

struct Sizes {
  int days = 365;
  int64_t orders_per_day = 27'398;         // 10.0 million orders in 365 days
  int64_t hours = 100'000;                 // the trivial job and the large plan
  int64_t small_orders_per_day = 2'740;    // 1.0 million in 365 days
  int64_t large_orders_per_day = 273'973;  // 100 million in 365 days
  int history_jobs = 9;                    // finished jobs before a restart
  int clients = 32;
  absl::Duration load_warmup = absl::Seconds(2);
  absl::Duration load_time = absl::Seconds(10);
  int plan_repeats = 5;
};

Sizes QuickSizes() {
  Sizes s;
  s.orders_per_day = 200;
  s.hours = 2'000;
  s.small_orders_per_day = 20;
  s.large_orders_per_day = 2'000;
  s.history_jobs = 4;
  s.load_warmup = absl::Milliseconds(200);
  s.load_time = absl::Seconds(1);
  s.plan_repeats = 2;
  return s;
}

std::string Machine() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model;
  while (std::getline(cpuinfo, line)) {
    if (absl::StartsWith(line, "model name")) {
      model = std::string(
          absl::StripAsciiWhitespace(line.substr(line.find(':') + 1)));
      break;
    }
  }
  std::ifstream meminfo("/proc/meminfo");
  int64_t mem_kb = 0;
  while (std::getline(meminfo, line)) {
    if (absl::StartsWith(line, "MemTotal:")) {
      std::vector<std::string> parts =
          absl::StrSplit(line, ' ', absl::SkipWhitespace());
      if (parts.size() > 1) absl::SimpleAtoi(parts[1], &mem_kb);
    }
  }
  utsname u{};
  uname(&u);
  return absl::StrFormat("%s, %d cores, %.0f GiB, Linux %s", model,
                         sysconf(_SC_NPROCESSORS_ONLN),
                         static_cast<double>(mem_kb) / (1 << 20), u.release);
}

class Suite {
 public:
  // The groups of rows --only names.
  static constexpr const char* kGroups[] = {
      "one-fix",  "cost",     "partitions", "plan-size",
      "replicas", "postgres", "million"};

  // `only`: the groups to run (kGroups); empty: all of them.
  Suite(bool quick, std::set<std::string> only, std::string bin_dir,
        fs::path dir)
      : quick_(quick),
        only_(std::move(only)),
        sizes_(quick ? QuickSizes() : Sizes()),
        bin_dir_(std::move(bin_dir)),
        dir_(std::move(dir)) {}

  absl::Status Run() {
    RETURN_IF_ERROR(Group("one-fix", [&] {
      OneFixBenchOptions options;
      options.quick = quick_;
      options.backfilld = Bin("backfilld");
      options.dir = dir_;
      options.workers = kWorkers;
      return AddOneFixRows(options, &rows_);
    }));
    RETURN_IF_ERROR(Group("cost", [&] { return CostRows(); }));
    RETURN_IF_ERROR(Group("partitions", [&] { return ManyPartitionRows(); }));
    RETURN_IF_ERROR(Group("plan-size", [&] { return PlanSizeRows(); }));
    RETURN_IF_ERROR(Group("replicas", [&] {
      ReplicaBenchOptions options;
      options.quick = quick_;
      options.backfilld = Bin("backfilld");
      options.dir = dir_ / "replicas";
      options.workers = kWorkers;
      return AddReplicaRows(options, &rows_);
    }));
    RETURN_IF_ERROR(Group("postgres", [&] {
      PostgresBenchOptions options;
      options.quick = quick_;
      options.backfilld = Bin("backfilld");
      options.dir = dir_ / "postgres";
      options.workers = kWorkers;
      fs::create_directories(options.dir);
      return AddPostgresRows(options, &rows_);
    }));
    RETURN_IF_ERROR(Group("million", [&] {
      MillionBenchOptions options;
      options.quick = quick_;
      options.backfilld = Bin("backfilld");
      options.dir = dir_;
      options.workers = kWorkers;
      return AddMillionRows(options, &rows_);
    }));
    return absl::OkStatus();
  }

  void Print(absl::Duration took) const {
    absl::PrintF("\n### backfilld performance%s\n\n",
                 quick_ ? " (--quick)" : "");
    absl::PrintF("%s, %s; build type %s; %d workers; suite ran %.0f s\n\n",
                 absl::FormatTime("%Y-%m-%d %H:%M UTC", absl::Now(),
                                  absl::UTCTimeZone()),
                 Machine(), BACKFILL_BENCH_BUILD_TYPE, kWorkers,
                 absl::ToDoubleSeconds(took));
    absl::PrintF("| measure | goal | figures | result | met |\n");
    absl::PrintF("|---|---|---|---:|:---:|\n");
    std::vector<Row> rows = rows_;
    rows.push_back(SuiteRow(took));
    for (const Row& r : rows) {
      absl::PrintF("| %s | %s | %s | %s | %s |\n", r.measure, r.goal, r.figures,
                   r.result,
                   !r.met.has_value() ? "" : (*r.met ? "yes" : "**no**"));
    }
    if (quick_) {
      absl::PrintF(
          "\n--quick: small data; the figures prove the suite runs, they "
          "measure nothing.\n");
    }
  }

 private:
  static constexpr int kWorkers = 2;

  bool Runs(const std::string& group) const {
    return only_.empty() || only_.count(group) > 0;
  }

  // Runs `rows` (the rows of `group`) if the group is chosen, timed.
  absl::Status Group(const std::string& group,
                     const std::function<absl::Status()>& rows) {
    if (!Runs(group)) return absl::OkStatus();
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(rows());
    group_seconds_.emplace_back(group,
                                absl::ToDoubleSeconds(absl::Now() - start));
    return absl::OkStatus();
  }

  // The suite's own time: a goal when every group ran, reported otherwise.
  Row SuiteRow(absl::Duration took) const {
    const bool all = only_.empty();
    Row row;
    row.measure = all ? "the whole suite, every group (its own wall time)"
                      : "the groups run (--only), their wall time";
    row.goal = all ? "< 10 min" : "(reported)";
    std::vector<std::string> parts;
    for (const auto& [group, seconds] : group_seconds_) {
      parts.push_back(absl::StrFormat("%s %.0f s", group, seconds));
    }
    row.figures = absl::StrJoin(parts, ", ");
    const double minutes = absl::ToDoubleMinutes(took);
    row.result = absl::StrFormat("%.1f min", minutes);
    if (all && !quick_) row.met = minutes < 10;
    return row;
  }

  std::string Bin(const std::string& name) const {
    return absl::StrCat(bin_dir_, "/", name);
  }

  void Log(const std::string& what) const {
    std::fprintf(stderr, "backfill_perf: %s\n", what.c_str());
  }

  // A data directory with pipelines/<name>.yaml holding `yaml`.
  absl::StatusOr<std::string> DataDir(const std::string& name,
                                      const std::string& yaml) const {
    const fs::path data = dir_ / name;
    fs::create_directories(data / "pipelines");
    RETURN_IF_ERROR(
        WriteTextFile((data / "pipelines" / "bench.yaml").string(), yaml));
    return data.string();
  }

  absl::StatusOr<std::unique_ptr<BenchDaemon>> StartDaemon(
      const std::string& data_dir, std::vector<std::string> extra_args = {},
      int workers = kWorkers) const {
    DaemonOptions options;
    options.binary = Bin("backfilld");
    options.data_dir = data_dir;
    options.workers = workers;
    options.extra_args = std::move(extra_args);
    return BenchDaemon::Start(options);
  }

  // The cost rows: a full reload through backfilld and directly, and a
  // 30-day backfill, on `days` x `orders_per_day` orders.
  absl::Status CostRows() {
    const int64_t orders = sizes_.days * sizes_.orders_per_day;
    ASSIGN_OR_RETURN(std::string data,
                     DataDir("cost", RevenuePipelineYaml({"orders"})));
    const std::string warehouse = data + "/warehouse.db";
    Log(absl::StrCat("generating ", Count(orders), " orders"));
    RETURN_IF_ERROR(AddOrdersTable(warehouse, "orders", sizes_.days,
                                   sizes_.orders_per_day));
    const std::vector<std::string> days = Days(sizes_.days);

    // The same SQL run directly: per day, in one transaction, the day's
    // rows deleted and the transform's inserted. Run first, so both read
    // the orders from the page cache (the generator just wrote them).
    const std::string script_path = (dir_ / "direct.sql").string();
    RETURN_IF_ERROR(WriteTextFile(
        script_path, DirectReloadScript("orders", "direct_revenue", days)));
    Log("full reload with sqlite3");
    ASSIGN_OR_RETURN(CommandUsage direct,
                     RunCommand({"sqlite3", warehouse}, script_path,
                                (dir_ / "sqlite3.log").string()));
    if (direct.exit_code != 0) {
      return absl::InternalError(absl::StrCat("sqlite3 exited ",
                                              direct.exit_code, " (see ",
                                              dir_.string(), "/sqlite3.log)"));
    }

    ASSIGN_OR_RETURN(std::unique_ptr<BenchDaemon> daemon, StartDaemon(data));
    Log("full reload through backfilld");
    ASSIGN_OR_RETURN(std::string metrics_before,
                     ScrapeMetrics(daemon->metrics_address()));
    const v1::BackfillRequest full = RangeRequest(
        "revenue_orders", days.front(), days.back(), "bench: full reload");
    ASSIGN_OR_RETURN(JobRun first, daemon->RunJob(full));
    ASSIGN_OR_RETURN(std::string metrics_after,
                     ScrapeMetrics(daemon->metrics_address()));
    RETURN_IF_ERROR(SameRows(warehouse, "revenue_orders", "direct_revenue"));

    // The 30-day backfill and a second full reload, both replacing
    // published partitions (so each validates against what is published).
    Log("30-day backfill and full reload through backfilld");
    const v1::BackfillRequest scoped =
        RangeRequest("revenue_orders", days[days.size() - 61],
                     days[days.size() - 31], "bench: 30 days");
    ASSIGN_OR_RETURN(JobRun thirty, daemon->RunJob(scoped));
    ASSIGN_OR_RETURN(std::string metrics_known_before,
                     ScrapeMetrics(daemon->metrics_address()));
    ASSIGN_OR_RETURN(JobRun second, daemon->RunJob(full));
    ASSIGN_OR_RETURN(std::string metrics_known_after,
                     ScrapeMetrics(daemon->metrics_address()));
    daemon->Stop();
    // The same third time with one worker, as sqlite3 runs the script: one
    // statement at a time on one core. Two workers share the machine's
    // cache and memory bandwidth, which costs CPU of its own.
    Log("full reload through backfilld with one worker");
    ASSIGN_OR_RETURN(std::unique_ptr<BenchDaemon> single,
                     StartDaemon(data, {}, /*workers=*/1));
    ASSIGN_OR_RETURN(JobRun third, single->RunJob(full));
    single->Stop();

    // The first full reload starts with no input fingerprint known (the
    // change triggers are installed before its first partition); the
    // second finds every input's fingerprint cached by the first with an
    // unchanged change signal, as a job does after any earlier job or
    // `plan --auto` read its inputs. Its partitions come out identical to
    // the published ones, so early cutoff validates and publishes none
    // (the first reload's checks are in its phase row). Both are printed.
    const std::string cpu_what = absl::StrCat(
        "CPU of a full reload (", sizes_.days, " days, ", Count(orders),
        " orders): backfilld / sqlite3 running the same SQL");
    const double known_ratio = second.daemon_cpu_seconds / direct.cpu_seconds;
    rows_.push_back(
        {absl::StrCat(cpu_what,
                      "; inputs' fingerprints known (the second full reload, "
                      "after the first cached them; its partitions come out "
                      "identical, so early cutoff publishes none)"),
         "<= 1.15x",
         absl::StrFormat("backfilld %.2f s CPU (%s wall, %d workers); "
                         "sqlite3 %.2f s CPU (%s wall)",
                         second.daemon_cpu_seconds, Sec(second.wall_seconds),
                         kWorkers, direct.cpu_seconds,
                         Sec(direct.wall_seconds)),
         absl::StrFormat("%.2fx", known_ratio), known_ratio <= 1.15});
    const double single_ratio = third.daemon_cpu_seconds / direct.cpu_seconds;
    rows_.push_back(
        {absl::StrCat(cpu_what,
                      "; inputs' fingerprints known, one worker (as "
                      "sqlite3: one statement at a time)"),
         "<= 1.15x",
         absl::StrFormat("backfilld %.2f s CPU (%s wall, 1 worker); "
                         "sqlite3 %.2f s CPU (%s wall)",
                         third.daemon_cpu_seconds, Sec(third.wall_seconds),
                         direct.cpu_seconds, Sec(direct.wall_seconds)),
         absl::StrFormat("%.2fx", single_ratio), single_ratio <= 1.15});
    const double cpu_ratio = first.daemon_cpu_seconds / direct.cpu_seconds;
    rows_.push_back(
        {absl::StrCat(cpu_what,
                      "; cold (the first full reload: no input "
                      "fingerprint known)"),
         "<= 1.15x",
         absl::StrFormat("backfilld %.2f s CPU (%s wall, %d workers); "
                         "sqlite3 %.2f s CPU (%s wall)",
                         first.daemon_cpu_seconds, Sec(first.wall_seconds),
                         kWorkers, direct.cpu_seconds,
                         Sec(direct.wall_seconds)),
         absl::StrFormat("%.2fx", cpu_ratio), cpu_ratio <= 1.15});
    const double share = 30.0 / sizes_.days;
    const double wall_share = thirty.wall_seconds / second.wall_seconds;
    const double cost_share =
        thirty.job.actual_cost() / std::max(1.0, second.job.actual_cost());
    rows_.push_back(
        {"wall of a 30-of-365-day backfill / wall of the full reload",
         absl::StrFormat("%.1f%% +- 2 points", 100 * share),
         absl::StrFormat("30 days %s, full reload %s; input rows %s / %s "
                         "(%.1f%%)",
                         Sec(thirty.wall_seconds), Sec(second.wall_seconds),
                         Count(thirty.job.actual_cost()),
                         Count(second.job.actual_cost()), 100 * cost_share),
         absl::StrFormat("%.1f%%", 100 * wall_share),
         std::abs(wall_share - share) <= 0.02});

    // Where each full reload's time went, from the daemon's own counters.
    PhaseRow(
        "fingerprints and checks per partition / the transform's own "
        "time; inputs' fingerprints known (the second full reload)",
        metrics_known_before, metrics_known_after);
    PhaseRow(
        "fingerprints and checks per partition / the transform's own "
        "time; cold (the first full reload)",
        metrics_before, metrics_after);
    return absl::OkStatus();
  }

  // The row of the fingerprint and check phases against the transform's,
  // between two scrapes of the daemon's metrics.
  void PhaseRow(const std::string& what, const std::string& metrics_before,
                const std::string& metrics_after) {
    const std::string family = "backfill_partition_phase_seconds_total";
    std::map<std::string, double> before = PhaseSamples(metrics_before, family);
    std::map<std::string, double> after = PhaseSamples(metrics_after, family);
    auto phase = [&](const std::string& name) {
      return after[name] - before[name];
    };
    const double transform = phase("transform");
    const double fingerprint = phase("fingerprint");
    const double validate = phase("validate");
    if (after.empty() || transform <= 0) {
      rows_.push_back(
          {what, "< 10%", "the daemon exports no phase times", "", false});
      return;
    }
    const double share_fc = (fingerprint + validate) / transform;
    rows_.push_back(
        {what, "< 10%",
         absl::StrFormat("per partition: transform %.2f ms, fingerprints "
                         "%.2f ms, checks %.2f ms (%d partitions)",
                         transform / sizes_.days * 1e3,
                         fingerprint / sizes_.days * 1e3,
                         validate / sizes_.days * 1e3, sizes_.days),
         absl::StrFormat("%.1f%%", 100 * share_fc), share_fc < 0.10});
  }

  // Fails unless tables `a` and `b` of the warehouse hold the same rows.
  absl::Status SameRows(const std::string& warehouse, const std::string& a,
                        const std::string& b) const {
    const std::string script = (dir_ / "compare.sql").string();
    RETURN_IF_ERROR(WriteTextFile(
        script,
        absl::StrFormat(
            "SELECT (SELECT COUNT(*) FROM (SELECT * FROM \"%1$s\" EXCEPT "
            "SELECT * FROM \"%2$s\")) || '/' || (SELECT COUNT(*) FROM "
            "(SELECT * FROM \"%2$s\" EXCEPT SELECT * FROM \"%1$s\")) "
            "|| '/' || (SELECT COUNT(*) FROM \"%1$s\");\n",
            a, b)));
    const std::string out = (dir_ / "compare.out").string();
    fs::remove(out);
    ASSIGN_OR_RETURN(
        CommandUsage usage,
        RunCommand({"sqlite3", "-readonly", warehouse}, script, out));
    std::ifstream in(out);
    std::string line;
    std::getline(in, line);
    std::vector<std::string> counts = absl::StrSplit(line, '/');
    if (usage.exit_code != 0 || counts.size() != 3 || counts[0] != "0" ||
        counts[1] != "0" || counts[2] == "0") {
      return absl::InternalError(
          absl::StrCat(a, " and ", b,
                       " differ (rows only in the first/only in the "
                       "second/in all): ",
                       line));
    }
    return absl::OkStatus();
  }

  // The rows over the trivial hourly pipeline: the plan and the job of
  // 100,000 partitions, GetBackfill against echo, and the restart.
  absl::Status ManyPartitionRows() {
    ASSIGN_OR_RETURN(std::string data,
                     DataDir("hours", TrivialHourlyPipelineYaml("ticks")));
    RETURN_IF_ERROR(AddEmptyHourTable(data + "/warehouse.db", "ticks"));
    const absl::CivilHour start(2000, 1, 1, 0);
    const int64_t n = sizes_.hours;
    auto range = [&](int64_t k) {
      return RangeRequest("hourly_ticks", HourPartition(start + k * n),
                          HourPartition(start + (k + 1) * n),
                          absl::StrCat("bench: ", Count(n), " hours"));
    };
    ASSIGN_OR_RETURN(std::unique_ptr<BenchDaemon> daemon, StartDaemon(data));

    // The plan of n partitions, as a client sees it.
    std::vector<double> plans;
    for (int i = 0; i < sizes_.plan_repeats + 1; ++i) {
      const absl::Time t = absl::Now();
      ASSIGN_OR_RETURN(v1::PlanBackfillResponse plan,
                       daemon->client().Plan(range(0)));
      (void)plan;
      if (i > 0) plans.push_back(absl::ToDoubleSeconds(absl::Now() - t));
    }
    const double plan_seconds = Median(plans);
    rows_.push_back({absl::StrCat("PlanBackfill of ", Count(n),
                                  " hour partitions (the client's wait)"),
                     "< 0.2 s",
                     absl::StrFormat("median of %d", sizes_.plan_repeats),
                     Sec(plan_seconds), plan_seconds < 0.2});

    Log(absl::StrCat("a job of ", Count(n), " partitions"));
    ASSIGN_OR_RETURN(JobRun job, daemon->RunJob(range(0)));
    ASSIGN_OR_RETURN(ProcessSample sample, daemon->Sample());
    const double rate = n / job.wall_seconds;
    rows_.push_back(
        {absl::StrCat(Count(n),
                      "-partition trivial job, durable "
                      "checkpoints, submit to SUCCEEDED"),
         ">= 25,000 partitions/s; peak RSS < 150 MB",
         absl::StrFormat("%s wall, daemon CPU %.2f s (%.0f us/partition)",
                         Sec(job.wall_seconds), job.daemon_cpu_seconds,
                         job.daemon_cpu_seconds / n * 1e6),
         absl::StrFormat("%s partitions/s; %.0f MB", Count(rate),
                         sample.peak_rss_kb / 1024.0),
         rate >= 25'000 && sample.peak_rss_kb < 150 * 1024});

    RETURN_IF_ERROR(RpcRows(*daemon, job.job.id()));

    // The restart: finished jobs up to (history_jobs + 1) x n partition
    // rows, one more job running when the daemon is killed.
    daemon->Stop();
    std::vector<BackfillRequest> history;
    for (int k = 1; k <= sizes_.history_jobs; ++k) {
      v1::BackfillRequest r = range(k);
      BackfillRequest h;
      h.dataset = r.dataset();
      h.from = r.from_partition();
      h.to = r.to_partition();
      h.reason = r.reason();
      history.push_back(h);
    }
    Log(absl::StrCat("recording ", sizes_.history_jobs, " finished jobs"));
    RETURN_IF_ERROR(RecordFinishedJobs(data, history));
    ASSIGN_OR_RETURN(daemon, StartDaemon(data));
    ASSIGN_OR_RETURN(
        v1::SubmitBackfillResponse running,
        daemon->client().Submit(range(sizes_.history_jobs + 1), ""));
    const std::string id = running.backfill().id();
    int64_t done_before = 0;
    while (true) {
      ASSIGN_OR_RETURN(v1::Backfill b,
                       daemon->client().Get(id, v1::BACKFILL_VIEW_BASIC));
      done_before = b.partitions().staged() + b.partitions().published();
      if (done_before >= n / 10) break;
      absl::SleepFor(absl::Milliseconds(5));
    }
    daemon->Kill();
    const int64_t rows = (sizes_.history_jobs + 2) * n;
    Log(absl::StrCat("restart over ", Count(rows), " partition rows"));
    ASSIGN_OR_RETURN(daemon, StartDaemon(data));
    const double serving = daemon->seconds_to_serving();
    const absl::Time served = absl::Now();
    ASSIGN_OR_RETURN(v1::Backfill b0,
                     daemon->client().Get(id, v1::BACKFILL_VIEW_BASIC));
    const int64_t done_at_start =
        b0.partitions().staged() + b0.partitions().published();
    // The first checkpoint after serving (none if the job was done by
    // then).
    double resumed = -1;
    while (done_at_start < b0.partitions().total() &&
           absl::Now() - served < absl::Minutes(2)) {
      ASSIGN_OR_RETURN(v1::Backfill b,
                       daemon->client().Get(id, v1::BACKFILL_VIEW_BASIC));
      if (b.partitions().staged() + b.partitions().published() >
          done_at_start) {
        resumed = absl::ToDoubleSeconds(absl::Now() - served);
        break;
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
    // Reads answered while the rest of the job runs.
    auto probe = std::make_unique<ReadProbe>(&daemon->client(), id);
    ASSIGN_OR_RETURN(v1::Backfill finished, daemon->WaitForJob(id));
    probe->Stop();
    daemon->Stop();
    rows_.push_back(
        {absl::StrCat("restart over ", Count(rows),
                      " partition rows, a job running (kill -9)"),
         "< 1 s to serving",
         absl::StrFormat(
             "killed after %s+ of %s partitions, %s checkpointed on restart; "
             "next checkpoint %s after serving; the job then %s",
             Count(done_before), Count(n), Count(done_at_start),
             resumed >= 0         ? Sec(resumed)
             : done_at_start == n ? "(none left)"
                                  : "(none in 2 min)",
             absl::AsciiStrToLower(v1::BackfillState_Name(finished.state())
                                       .substr(strlen("BACKFILL_STATE_")))),
         Sec(serving), serving < 1.0});
    ReadRow(*probe, n);
    return absl::OkStatus();
  }

  // The row of the reads answered while a job of `n` partitions ran.
  void ReadRow(const ReadProbe& probe, int64_t n) {
    const ReadProbe::Latencies& l = probe.latencies();
    const double worst = probe.WorstP99();
    rows_.push_back(
        {absl::StrCat("status, list and watch while a ", Count(n),
                      "-partition job runs (the restart's job, after it "
                      "resumed)"),
         "p99 < 100 ms each", probe.Figures(),
         absl::StrFormat("%.1f ms", worst * 1e3),
         l.errors == 0 && !l.get.empty() && worst < 0.100});
  }

  // GetBackfill (BASIC) against a bare echo server answering as many bytes.
  absl::Status RpcRows(BenchDaemon& daemon, const std::string& job_id) {
    ASSIGN_OR_RETURN(v1::Backfill basic,
                     daemon.client().Get(job_id, v1::BACKFILL_VIEW_BASIC));
    const size_t bytes = basic.ByteSizeLong();
    Log(absl::StrCat("GetBackfill and echo, ", sizes_.clients, " clients"));
    ASSIGN_OR_RETURN(LoadResult get,
                     LoadGetBackfill(daemon.target(), job_id, sizes_.clients,
                                     sizes_.load_warmup, sizes_.load_time));
    const std::string echo_target = absl::StrCat("127.0.0.1:", FreePort());
    ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> echo,
                     ChildProcess::Start(
                         {Bin("backfill_echo_server"), "--listen", echo_target},
                         (dir_ / "echo.log").string()));
    RETURN_IF_ERROR(WaitForEcho(echo_target, absl::Seconds(30)));
    ASSIGN_OR_RETURN(LoadResult bare,
                     LoadEcho(echo_target, bytes, sizes_.clients,
                              sizes_.load_warmup, sizes_.load_time));
    echo->Stop(absl::Seconds(10));
    if (get.errors > 0 || bare.errors > 0) {
      return absl::InternalError(absl::StrCat(
          "load errors: GetBackfill ", get.errors, " (", get.first_error,
          "), echo ", bare.errors, " (", bare.first_error, ")"));
    }
    const double ratio = get.qps / bare.qps;
    rows_.push_back(
        {absl::StrCat("GetBackfill (BASIC, ", bytes, " bytes) QPS, ",
                      sizes_.clients,
                      " clients / bare gRPC echo of as many "
                      "bytes"),
         ">= 0.5x, p99 printed",
         absl::StrFormat("GetBackfill %s/s, p50 %.0f us, p99 %.0f us; echo "
                         "%s/s, p50 %.0f us, p99 %.0f us",
                         Count(get.qps), get.p50_us, get.p99_us,
                         Count(bare.qps), bare.p50_us, bare.p99_us),
         absl::StrFormat("%.2fx", ratio), ratio >= 0.5});
    return absl::OkStatus();
  }

  // The same 30-day plan over 1 million and over 100 million orders.
  absl::Status PlanSizeRows() {
    ASSIGN_OR_RETURN(std::string data,
                     DataDir("plans", RevenuePipelineYaml({"small", "large"})));
    const std::string warehouse = data + "/warehouse.db";
    const int64_t small = sizes_.days * sizes_.small_orders_per_day;
    const int64_t large = sizes_.days * sizes_.large_orders_per_day;
    Log(absl::StrCat("generating ", Count(small), " and ", Count(large),
                     " orders"));
    RETURN_IF_ERROR(AddOrdersTable(warehouse, "small", sizes_.days,
                                   sizes_.small_orders_per_day));
    RETURN_IF_ERROR(AddOrdersTable(warehouse, "large", sizes_.days,
                                   sizes_.large_orders_per_day));
    ASSIGN_OR_RETURN(std::unique_ptr<BenchDaemon> daemon, StartDaemon(data));
    const std::vector<std::string> days = Days(sizes_.days);
    struct Timing {
      double first = 0;
      double steady = 0;
    };
    auto time_plans = [&](const std::string& table) -> absl::StatusOr<Timing> {
      const v1::BackfillRequest r =
          RangeRequest(absl::StrCat("revenue_", table), days[days.size() - 61],
                       days[days.size() - 31], "bench: plan");
      Timing t;
      std::vector<double> later;
      for (int i = 0; i < sizes_.plan_repeats + 1; ++i) {
        const absl::Time t0 = absl::Now();
        ASSIGN_OR_RETURN(v1::PlanBackfillResponse plan,
                         daemon->client().Plan(r));
        (void)plan;
        const double s = absl::ToDoubleSeconds(absl::Now() - t0);
        if (i == 0) {
          t.first = s;
        } else {
          later.push_back(s);
        }
      }
      t.steady = Median(later);
      return t;
    };
    ASSIGN_OR_RETURN(Timing s, time_plans("small"));
    ASSIGN_OR_RETURN(Timing l, time_plans("large"));
    daemon->Stop();
    const double ratio = l.steady / s.steady;
    rows_.push_back(
        {absl::StrCat("30-day PlanBackfill over ", Count(large), " / over ",
                      Count(small), " orders (", sizes_.days, " days)"),
         "flat (~1x)",
         absl::StrFormat("%s / %s (median of %d); the first plan, which "
                         "counts the tables: %s / %s",
                         Sec(l.steady), Sec(s.steady), sizes_.plan_repeats,
                         Sec(l.first), Sec(s.first)),
         absl::StrFormat("%.2fx", ratio), ratio <= 1.5});
    return absl::OkStatus();
  }

  bool quick_;
  std::set<std::string> only_;
  std::vector<std::pair<std::string, double>> group_seconds_;
  Sizes sizes_;
  std::string bin_dir_;
  fs::path dir_;
  std::vector<Row> rows_;
};

int Main(int argc, char** argv) {
  // The load clients run as the servers they measure do: without Abseil's
  // lock-order check (server/main.cc says why).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  bool quick = false;
  bool keep = false;
  std::set<std::string> only;
  std::string bin_dir = fs::absolute(argv[0]).parent_path().string();
  std::string work_dir = fs::temp_directory_path().string();
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--quick") {
      quick = true;
    } else if (flag == "--keep") {
      keep = true;
    } else if (flag == "--only" && i + 1 < argc) {
      for (absl::string_view group : absl::StrSplit(argv[++i], ',')) {
        if (std::find(std::begin(Suite::kGroups), std::end(Suite::kGroups),
                      group) == std::end(Suite::kGroups)) {
          std::fprintf(stderr,
                       "backfill_perf: --only: no group \"%s\" (the groups "
                       "are one-fix, cost, partitions, plan-size, replicas and "
                       "postgres, million)\n",
                       std::string(group).c_str());
          return 2;
        }
        only.insert(std::string(group));
      }
    } else if (flag == "--bin-dir" && i + 1 < argc) {
      bin_dir = argv[++i];
    } else if (flag == "--work-dir" && i + 1 < argc) {
      work_dir = argv[++i];
    } else {
      std::fprintf(
          stderr,
          "usage: backfill_perf [--quick] [--only "
          "one-fix,cost,partitions,plan-size,replicas,postgres,million] "
          "[--bin-dir DIR] "
          "[--work-dir DIR] [--keep]\n");
      return 2;
    }
  }
  const fs::path dir =
      fs::path(work_dir) / absl::StrCat("backfill_perf_", getpid());
  std::error_code error;
  fs::remove_all(dir, error);
  if (!fs::create_directories(dir, error) || error) {
    std::fprintf(stderr, "backfill_perf: cannot create %s: %s\n",
                 dir.string().c_str(),
                 error ? error.message().c_str() : "it exists");
    return 2;
  }
  const absl::Time start = absl::Now();
  Suite suite(quick, std::move(only), bin_dir, dir);
  absl::Status ran = suite.Run();
  if (!ran.ok()) {
    std::fprintf(stderr, "backfill_perf: %s (work files kept in %s)\n",
                 ran.ToString().c_str(), dir.string().c_str());
    return 1;
  }
  suite.Print(absl::Now() - start);
  if (!keep) fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace backfill::bench

int main(int argc, char** argv) { return backfill::bench::Main(argc, argv); }
