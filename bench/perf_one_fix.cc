#include "bench/perf_one_fix.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.pb.h"
#include "bench/perf_daemon.h"
#include "bench/perf_fixtures.h"
#include "bench/perf_job_states.h"
#include "core/base/status_macros.h"

namespace backfill::bench {
namespace {

namespace fs = std::filesystem;

std::string Ms(double seconds) {
  return absl::StrFormat("%.1f ms", seconds * 1e3);
}

// The baseline: the trivial transform's SELECT and its publish, as plain
// SQL in one transaction, hour after hour, on its own connection.
class DirectFix {
 public:
  static absl::StatusOr<std::unique_ptr<DirectFix>> Open(
      const std::string& path) {
    auto fix = std::unique_ptr<DirectFix>(new DirectFix());
    if (sqlite3_open(path.c_str(), &fix->db_) != SQLITE_OK) {
      return absl::InternalError(absl::StrCat("open ", path));
    }
    sqlite3_busy_timeout(fix->db_, 10'000);
    for (const char* sql :
         {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
          "CREATE TABLE IF NOT EXISTS direct_hourly_ticks (h TEXT PRIMARY "
          "KEY, n INTEGER)"}) {
      RETURN_IF_ERROR(fix->Exec(sql));
    }
    RETURN_IF_ERROR(fix->Prepare("DELETE FROM direct_hourly_ticks WHERE h = ?1",
                                 &fix->remove_));
    RETURN_IF_ERROR(fix->Prepare(
        "INSERT INTO direct_hourly_ticks SELECT ?1 AS h, COUNT(*) AS n FROM "
        "ticks WHERE h >= ?1 AND h < ?2",
        &fix->insert_));
    return fix;
  }

  ~DirectFix() {
    sqlite3_finalize(remove_);
    sqlite3_finalize(insert_);
    sqlite3_close(db_);
  }

  // Recomputes and publishes [start, end) in one transaction.
  absl::Status Run(const std::string& start, const std::string& end) {
    RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    sqlite3_bind_text(remove_, 1, start.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(insert_, 1, start.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(insert_, 2, end.c_str(), -1, SQLITE_TRANSIENT);
    for (sqlite3_stmt* stmt : {remove_, insert_}) {
      const int rc = sqlite3_step(stmt);
      sqlite3_reset(stmt);
      if (rc != SQLITE_DONE) {
        return absl::InternalError(sqlite3_errmsg(db_));
      }
    }
    return Exec("COMMIT");
  }

 private:
  DirectFix() = default;

  absl::Status Exec(const char* sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
      const std::string message = error != nullptr ? error : "";
      sqlite3_free(error);
      return absl::InternalError(absl::StrCat(sql, ": ", message));
    }
    return absl::OkStatus();
  }

  absl::Status Prepare(const char* sql, sqlite3_stmt** stmt) {
    if (sqlite3_prepare_v2(db_, sql, -1, stmt, nullptr) != SQLITE_OK) {
      return absl::InternalError(absl::StrCat(sql, ": ", sqlite3_errmsg(db_)));
    }
    return absl::OkStatus();
  }

  sqlite3* db_ = nullptr;
  sqlite3_stmt* remove_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
};

// The spans of one job, in seconds: from the client's submit to the job's
// creation, then in each state, then from SUCCEEDED to the watch's update
// saying so, then to the end of the watch's stream.
constexpr const char* kSpans[] = {"submit",   "queued",    "recompute",
                                  "validate", "publish",   "confirm",
                                  "notice",   "stream end"};

// When the client saw the job SUCCEEDED (its watch's update), and when the
// watch's stream ended.
struct Seen {
  absl::Time succeeded = absl::InfinitePast();
  absl::Time ended = absl::InfinitePast();
  v1::Backfill last;
};

absl::StatusOr<Seen> WatchToTheEnd(BackfillClient& client,
                                   const std::string& id) {
  Seen seen;
  absl::Status watched = client.Watch(
      id,
      [&seen](const v1::Backfill& update) {
        if (update.state() == v1::BACKFILL_STATE_SUCCEEDED &&
            seen.succeeded == absl::InfinitePast()) {
          seen.succeeded = absl::Now();
        }
        seen.last = update;
        return true;
      },
      v1::BACKFILL_VIEW_BASIC);
  seen.ended = absl::Now();
  if (!watched.ok()) return watched;
  if (seen.last.state() != v1::BACKFILL_STATE_SUCCEEDED) {
    return absl::AbortedError(absl::StrCat(
        "job ", id, " ended ", v1::BackfillState_Name(seen.last.state()), ": ",
        seen.last.message()));
  }
  return seen;
}

absl::StatusOr<std::map<std::string, double>> SpansOf(BackfillClient& client,
                                                      const std::string& id,
                                                      absl::Time sent,
                                                      const Seen& seen) {
  // When the job entered each state.
  ASSIGN_OR_RETURN(auto entered, StatesEntered(client, id));
  auto at = [&](v1::BackfillState s) -> absl::StatusOr<absl::Time> {
    auto it = entered.find(s);
    if (it == entered.end()) {
      return absl::InternalError(absl::StrCat(
          "job ", id, " has no audit event into ", v1::BackfillState_Name(s)));
    }
    return it->second;
  };
  ASSIGN_OR_RETURN(absl::Time queued, at(v1::BACKFILL_STATE_QUEUED));
  ASSIGN_OR_RETURN(absl::Time running, at(v1::BACKFILL_STATE_RUNNING));
  ASSIGN_OR_RETURN(absl::Time validating, at(v1::BACKFILL_STATE_VALIDATING));
  ASSIGN_OR_RETURN(absl::Time publishing, at(v1::BACKFILL_STATE_PUBLISHING));
  ASSIGN_OR_RETURN(absl::Time confirming, at(v1::BACKFILL_STATE_CONFIRMING));
  ASSIGN_OR_RETURN(absl::Time succeeded, at(v1::BACKFILL_STATE_SUCCEEDED));
  const absl::Time points[] = {sent,       queued,         running,
                               validating, publishing,     confirming,
                               succeeded,  seen.succeeded, seen.ended};
  std::map<std::string, double> spans;
  for (size_t i = 0; i < std::size(kSpans); ++i) {
    spans[kSpans[i]] = absl::ToDoubleSeconds(points[i + 1] - points[i]);
  }
  return spans;
}

}  // namespace

absl::Status AddOneFixRows(const OneFixBenchOptions& options,
                           std::vector<Row>* rows) {
  const int jobs = options.quick ? 20 : 200;
  const int warmup = options.quick ? 2 : 10;
  const fs::path data = options.dir / "one-fix";
  fs::create_directories(data / "pipelines");
  RETURN_IF_ERROR(WriteTextFile((data / "pipelines" / "bench.yaml").string(),
                                TrivialHourlyPipelineYaml("ticks")));
  const std::string warehouse = (data / "warehouse.db").string();
  RETURN_IF_ERROR(AddEmptyHourTable(warehouse, "ticks"));

  DaemonOptions daemon_options;
  daemon_options.binary = options.backfilld;
  daemon_options.data_dir = data.string();
  daemon_options.workers = options.workers;
  ASSIGN_OR_RETURN(std::unique_ptr<BenchDaemon> daemon,
                   BenchDaemon::Start(daemon_options));

  // Jobs one after the other, each on an hour of its own.
  const absl::CivilHour first(2001, 1, 1, 0);
  std::vector<double> walls;
  std::map<std::string, std::vector<double>> spans;
  for (int i = 0; i < warmup + jobs; ++i) {
    v1::BackfillRequest request;
    request.set_dataset("hourly_ticks");
    request.add_partitions(HourPartition(first + i));
    request.set_reason("bench: one-partition fix");
    const absl::Time sent = absl::Now();
    ASSIGN_OR_RETURN(v1::SubmitBackfillResponse submitted,
                     daemon->client().Submit(request, ""));
    const std::string id = submitted.backfill().id();
    ASSIGN_OR_RETURN(Seen seen, WatchToTheEnd(daemon->client(), id));
    if (seen.last.partitions().published() != 1) {
      return absl::InternalError(absl::StrCat(
          "job ", id, " published ", seen.last.partitions().published(),
          " partitions, not 1"));
    }
    if (i < warmup) continue;
    walls.push_back(absl::ToDoubleSeconds(seen.succeeded - sent));
    ASSIGN_OR_RETURN(auto job_spans, SpansOf(daemon->client(), id, sent, seen));
    for (const auto& [name, seconds] : job_spans) {
      spans[name].push_back(seconds);
    }
  }
  daemon->Stop();

  // The baseline, on other hours of the same warehouse.
  ASSIGN_OR_RETURN(std::unique_ptr<DirectFix> direct,
                   DirectFix::Open(warehouse));
  std::vector<double> direct_walls;
  const absl::CivilHour other(2002, 1, 1, 0);
  for (int i = 0; i < warmup + jobs; ++i) {
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(
        direct->Run(HourPartition(other + i), HourPartition(other + i + 1)));
    if (i >= warmup) {
      direct_walls.push_back(absl::ToDoubleSeconds(absl::Now() - start));
    }
  }

  const double p50 = Quantile(walls, 0.5);
  const double p99 = Quantile(walls, 0.99);
  const double sql50 = Quantile(direct_walls, 0.5);
  const double sql99 = Quantile(direct_walls, 0.99);
  const double added = p50 - sql50;
  rows->push_back(
      {absl::StrCat("a one-partition fix, trivial transform: SubmitBackfill "
                    "to SUCCEEDED as the client sees it, ",
                    jobs,
                    " jobs one after the other / the same transform and "
                    "publish as plain SQL in one transaction"),
       "the daemon adds < 20 ms at p50",
       absl::StrFormat("backfilld p50 %s, p99 %s; plain SQL p50 %s, p99 %s",
                       Ms(p50), Ms(p99), Ms(sql50), Ms(sql99)),
       absl::StrFormat("+%s at p50", Ms(added)), added < 0.020});
  std::string where;
  double sum = 0;
  for (const char* name : kSpans) {
    const double median = Quantile(spans[name], 0.5);
    sum += median;
    absl::StrAppend(&where, where.empty() ? "" : ", ", name, " ", Ms(median));
  }
  rows->push_back(
      {"where a one-partition fix's time goes (medians per step, from the "
       "job's audit events and the client's clock)",
       "(reported)",
       absl::StrCat(where, absl::StrFormat(" (sum of medians %s)", Ms(sum))),
       Ms(p50), std::nullopt});
  return absl::OkStatus();
}

}  // namespace backfill::bench
