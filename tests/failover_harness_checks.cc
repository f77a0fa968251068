// The waits and checks of a failover harness trial (failover_harness_trial.h's
// Trial): until its jobs are terminal, a second submit of each key, and
// what plain SQL over the warehouse and the state store says of them.

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/failover_harness_model.h"
#include "tests/failover_harness_processes.h"
#include "tests/failover_harness_trial.h"
#include "tests/testing/e2e_support.h"

namespace backfill::failover {

void Trial::WaitTerminal() {
  const auto deadline = Clock::now() + seconds(120);
  for (JobPlan& job : jobs_) {
    if (job.id.empty()) continue;
    RunResult last;
    while (Clock::now() < deadline) {
      const int i = Serving();
      if (i < 0) break;
      last = R(i).daemon().CtlJson({"status", job.id}, seconds(20));
      const std::string state = e2e::JsonString(last.out, "state");
      if (last.exit_code == 0 && e2e::IsTerminalState(state)) {
        job.state = state;
        break;
      }
      std::this_thread::sleep_for(milliseconds(250));
    }
    if (job.state.empty()) {
      Fail(kLost, absl::StrCat(job.id,
                               " not terminal 120 s after the submit; "
                               "last status: exit ",
                               last.exit_code, " ", Tail(last.out, 3),
                               Tail(last.err, 3)));
    }
  }
  result_.job_seconds =
      std::chrono::duration<double>(Clock::now() - submitted_).count();
}

void Trial::Resubmit() {
  for (const JobPlan& job : jobs_) {
    if (job.id.empty()) continue;
    const int i = Serving(job.via);
    if (i < 0) continue;
    RunResult r = R(i).daemon().CtlJson(
        {"submit", "daily_revenue", "--from", Day(job.first), "--to",
         Day(job.end), "--reason", kReason, "--idempotency-key", job.key},
        seconds(60));
    const std::string id = e2e::JsonString(r.out, "id");
    if (r.exit_code != 0 || id != job.id) {
      Fail(kDuplicated,
           absl::StrCat("submitting ", job.key, " again through ", R(i).name(),
                        " gave \"", id, "\" (exit ", r.exit_code,
                        "), expected ", job.id, " ", Tail(r.err, 2)));
    }
  }
}

void Trial::NoteWaits() {
  for (Pg* db : {&group_.state(), &group_.wh()}) {
    std::optional<Rows> rows = db->Query(
        "SELECT pid, state, COALESCE(wait_event_type, '') || ':' || "
        "COALESCE(wait_event, ''), pg_blocking_pids(pid)::text, "
        "left(regexp_replace(query, '\\s+', ' ', 'g'), 160) FROM "
        "pg_stat_activity WHERE datname = current_database() AND pid <> "
        "pg_backend_pid() AND (wait_event_type = 'Lock' OR state LIKE "
        "'idle in transaction%')");
    if (!rows) continue;
    for (const Row& r : *rows) {
      Note(absl::StrCat(db == &group_.state() ? "state" : "warehouse",
                        " session ", r[0], " ", r[1], " ", r[2], " blocked by ",
                        r[3], ": ", r[4]));
    }
  }
}

void Trial::CountRefusals() {
  for (int i = 0; i < kReplicas; ++i) {
    const std::string log =
        ReadFile(R(i).log())
            .substr(std::min(log_offsets_[i], ReadFile(R(i).log()).size()));
    for (absl::string_view line : absl::StrSplit(log, '\n')) {
      if (absl::StrContains(line, "LEASE_LOST") ||
          absl::StrContains(line, "no longer holds the lease") ||
          absl::StrContains(line, "the warehouse's fence is")) {
        ++result_.refusals;
      }
      if (absl::StrContains(line, "Sanitizer") ||
          absl::StrContains(line, "runtime error:")) {
        Fail(kExit, absl::StrCat(R(i).name(), ": ", line));
      }
    }
  }
}

void Trial::CheckJob(const JobPlan& job, const Contents& published) {
  Pg& state = group_.state();
  const std::vector<std::string> id = {job.id};
  std::optional<Rows> row = state.Query(
      "SELECT state, message FROM backfill_state.jobs WHERE id = $1", id);
  const bool succeeded = row && row->size() == 1 && (*row)[0][0] == "SUCCEEDED";
  if (!succeeded) {
    Fail(kLost,
         row && row->size() == 1
             ? absl::StrCat(job.id, " ended ", (*row)[0][0], ": ", (*row)[0][1])
             : absl::StrCat(job.id, " not found: ", state.error()));
  }
  const std::optional<int64_t> with_key = state.Count(
      "SELECT COUNT(*) FROM backfill_state.jobs WHERE idempotency_key = $1",
      {job.key});
  if (with_key != 1) {
    Fail(kDuplicated,
         absl::StrCat(with_key.value_or(-1), " jobs of key ", job.key));
  }
  // Its partitions: all new, or (when it did not succeed) all old.
  int olds = 0, news = 0;
  for (const Key& key : job.partitions) {
    const Rows& p = RowsOf(published, key);
    const bool is_new = p == RowsOf(new_, key);
    const bool is_old = p == RowsOf(old_, key);
    news += is_new;
    olds += is_old;
    if (!is_new && !is_old) {
      Fail(kMixed, absl::StrCat(KeyName(key), " of ", job.id,
                                " is neither old nor new: ", Describe(p),
                                "; new ", Describe(RowsOf(new_, key))));
    } else if (succeeded && !is_new) {
      Fail(kMixed, absl::StrCat(KeyName(key), " of ", job.id,
                                " (SUCCEEDED) is still the old version"));
    }
  }
  if (olds > 0 && news > 0) {
    Fail(kMixed, absl::StrCat(job.id, " is half published: ", news,
                              " partitions new, ", olds, " old"));
  }
  const bool published_new = news > 0;
  // Lineage: one record per partition of the job, once published.
  std::optional<Rows> lineage = state.Query(
      "SELECT dataset, \"partition\", COUNT(*) FROM backfill_state.lineage "
      "WHERE job_id = $1 GROUP BY 1, 2",
      id);
  if (!lineage) {
    Fail(kOther, state.error());
    return;
  }
  std::set<Key> recorded;
  for (const Row& l : *lineage) {
    recorded.insert({l[0], l[1]});
    if (l[2] != "1") {
      Fail(kDuplicated, absl::StrCat(job.id, " has ", l[2],
                                     " lineage records for ", l[0], "/", l[1]));
    }
  }
  const std::set<Key> want = published_new ? job.partitions : std::set<Key>();
  if (recorded != want) {
    Fail(kLineage, absl::StrCat(job.id, " has lineage for ", recorded.size(),
                                " partitions, expected ", want.size()));
  }
  const std::optional<int64_t> markers = group_.wh().Count(
      "SELECT COUNT(*) FROM _bf.publications WHERE job_id = $1", id);
  if (markers != (published_new ? 1 : 0)) {
    Fail(markers.value_or(0) > 1 ? kDuplicated : kLineage,
         absl::StrCat(job.id, " has ", markers.value_or(-1),
                      " publication markers in the warehouse, expected ",
                      published_new ? 1 : 0, " ", group_.wh().error()));
  }
  // The audit trail: one chain, no transition twice but a retry's.
  std::optional<Rows> audit = state.Query(
      "SELECT from_state, to_state FROM backfill_state.audit_events WHERE "
      "job_id = $1 ORDER BY seq",
      id);
  if (!audit) {
    Fail(kOther, state.error());
    return;
  }
  std::map<std::pair<std::string, std::string>, int> moves;
  std::vector<std::string> trail;
  for (size_t i = 0; i < audit->size(); ++i) {
    const Row& e = (*audit)[i];
    trail.push_back(absl::StrCat(e[0], "->", e[1]));
    if (i > 0 && e[0] != (*audit)[i - 1][1]) {
      Fail(kFenced, absl::StrCat(job.id, ": the audit trail breaks at ", e[0],
                                 "->", e[1], " after ->", (*audit)[i - 1][1]));
    }
    ++moves[{e[0], e[1]}];
  }
  int succeeded_events = 0, publishes = 0;
  for (const auto& [move, n] : moves) {
    const bool retry =
        (move.first == "RUNNING" && move.second == "VALIDATING") ||
        (move.first == "VALIDATING" && move.second == "RUNNING");
    if (n > 1 && !retry) {
      Fail(kFenced, absl::StrCat(job.id, ": ", move.first, "->", move.second,
                                 " recorded ", n, " times"));
    }
    if (move.second == "SUCCEEDED") succeeded_events += n;
    if (move.first == "PUBLISHING" && move.second == "CONFIRMING") {
      publishes += n;
    }
  }
  if (succeeded && (succeeded_events != 1 || publishes != 1)) {
    Fail(kFenced,
         absl::StrCat(job.id, ": ", succeeded_events, " SUCCEEDED events and ",
                      publishes, " publishes in its audit trail"));
  }
  if (!result_.findings.ok()) {
    Note(absl::StrCat(job.id, " audit: ", absl::StrJoin(trail, " ")));
  }
}

void Trial::Check() {
  std::optional<Contents> published =
      ReadContents(group_.wh(), &DatasetModel::published_sql);
  if (!published) {
    Fail(kOther, absl::StrCat("reading the warehouse: ", group_.wh().error()));
    return;
  }
  std::set<Key> in_jobs;
  for (const JobPlan& job : jobs_) {
    in_jobs.insert(job.partitions.begin(), job.partitions.end());
    if (!job.id.empty()) CheckJob(job, *published);
  }
  std::set<Key> keys;
  for (const Contents* c : {&*published, &old_}) {
    for (const auto& [key, rows] : *c) keys.insert(key);
  }
  for (const Key& key : keys) {
    if (!in_jobs.count(key) && RowsOf(*published, key) != RowsOf(old_, key)) {
      Fail(kMixed, absl::StrCat(KeyName(key),
                                " is outside the jobs but "
                                "changed: ",
                                Describe(RowsOf(*published, key)), "; was ",
                                Describe(RowsOf(old_, key))));
    }
  }
  // Lineage only for the jobs of the group's load and trials.
  const std::optional<int64_t> strays = group_.state().Count(
      "SELECT COUNT(*) FROM (SELECT job_id, dataset, \"partition\" FROM "
      "backfill_state.lineage GROUP BY 1, 2, 3 HAVING COUNT(*) > 1) d");
  if (strays != 0) {
    Fail(kDuplicated, absl::StrCat(strays.value_or(-1),
                                   " (job, partition) pairs with more than "
                                   "one lineage record in the state store"));
  }
}

void Trial::DumpState() {
  std::ofstream out(absl::StrCat(group_.dir(), "/trial-", number_, ".txt"));
  for (const JobPlan& job : jobs_) {
    out << "job " << job.id << " key " << job.key << " days " << Day(job.first)
        << ".." << Day(job.end) << "\n";
    for (const char* sql :
         {"SELECT seq, from_state, to_state, message, at FROM "
          "backfill_state.audit_events WHERE job_id = $1 ORDER BY seq",
          "SELECT node, token, step, claimed_at, expires_at FROM "
          "backfill_state.job_leases WHERE job_id = $1",
          "SELECT dataset, state, COUNT(*), MAX(attempts) FROM "
          "backfill_state.tasks WHERE job_id = $1 GROUP BY 1, 2"}) {
      out << "-- " << sql << "\n";
      if (std::optional<Rows> rows = group_.state().Query(sql, {job.id})) {
        for (const Row& r : *rows) out << absl::StrJoin(r, " | ") << "\n";
      }
    }
  }
}

}  // namespace backfill::failover
