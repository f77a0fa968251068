// backfillctl: the operator CLI of backfilld. See docs/cli.md.
//
// Exit codes: 0 success (for `submit --wait` and `watch`: the job
// SUCCEEDED); 1 an RPC failed or the job ended in another state; 2 usage
// error; 130 interrupted while following a job (the job keeps running).

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/backfill_client.h"
#include "client/cli_args.h"
#include "client/cli_command_line.h"
#include "client/cli_completion.h"
#include "client/cli_format.h"
#include "client/cli_suggest.h"
#include "client/cli_terms.h"
#include "client/governance_format.h"
#include "client/rpc_error.h"

namespace backfill {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInterrupted = 130;
constexpr absl::Duration kPollInterval = absl::Milliseconds(500);
// How long polling tolerates a server that went away (e.g. restarting)
// before giving up on a job it has already seen.
constexpr absl::Duration kPollOutageTolerance = absl::Seconds(60);
// --priority is -kMaxPriority..kMaxPriority, as the server requires.
constexpr int kMaxPriority = 1000;

using cli::ApproveOptions;
using cli::AuditOptions;
using cli::DiffOptions;
using cli::GlobalOptions;
using cli::JobOptions;
using cli::kDefaultListLimit;
using cli::kListPageSize;
using cli::ListOptions;
using cli::PartitionsOptions;
using cli::RollbackOptions;
using cli::ScopeOptions;
using cli::SubmitOptions;
using cli::WhyOptions;

// Reads the TLS files of `globals` into globals->security. A file that
// cannot be read is a usage error naming its flag.
absl::Status ReadTlsFiles(GlobalOptions* globals) {
  const std::pair<const char*, std::pair<const std::string*, std::string*>>
      files[] = {
          {"--tls-ca", {&globals->tls_ca_file, &globals->security.ca}},
          {"--tls-cert", {&globals->tls_cert_file, &globals->security.cert}},
          {"--tls-key", {&globals->tls_key_file, &globals->security.key}},
      };
  for (const auto& [flag, paths] : files) {
    const std::string& path = *paths.first;
    if (path.empty()) continue;
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in || text.str().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": cannot read ", path));
    }
    *paths.second = text.str();
    globals->security.tls = true;
  }
  if (globals->tls_cert_file.empty() != globals->tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together (a client certificate and its "
        "key)");
  }
  return absl::OkStatus();
}

// The decisions on a job that `cancel`, `pause`, `resume` and `retry` send.
enum class JobAction { kCancel, kPause, kResume, kRetry };

// Prints `backfillctl: MESSAGE` on stderr (one line, control characters
// escaped) and returns `code`.
int Fail(int code, absl::string_view message) {
  std::cerr << "backfillctl: "
            << cli::TerminalText(
                   absl::StrReplaceAll(message, {{"\n", " "}, {"\r", " "}}))
            << std::endl;
  return code;
}

class Cli {
 public:
  explicit Cli(const GlobalOptions& globals)
      : globals_(globals),
        client_(BackfillClient::Connect(globals.server, globals.security)) {
    client_->set_rpc_timeout(absl::Seconds(globals.timeout_seconds));
    client_->set_token(globals.token);
  }

  int Datasets();
  int Plan(const ScopeOptions& scope);
  int Submit(const ScopeOptions& scope, const SubmitOptions& options);
  int Status(const std::string& id);
  int List(const ListOptions& options);
  int Partitions(const PartitionsOptions& options);
  int Watch(const std::string& id);
  int Decide(JobAction action, const JobOptions& options);
  int Rollback(const std::string& id, const RollbackOptions& options);
  int Approve(const ApproveOptions& options);
  int Diff(const DiffOptions& options);
  int Why(const WhyOptions& options);
  int Audit(const AuditOptions& options);
  int Confirm(const std::string& id, bool wait);
  // grpc.health.v1 of the BackfillService: 0 when SERVING (or, with
  // `answering`, whenever the server answers), 1 otherwise.
  int Health(bool answering);

 private:
  // Prints an RPC failure as `backfillctl: CODE: message[; hint]` (`more`
  // appended); returns 1.
  int RpcError(const absl::Status& status, absl::string_view more = "") const;
  // Prints `message` as JSON in --json mode, `human` otherwise.
  int Print(const google::protobuf::Message& message,
            const std::string& human) const;
  // Follows job `id` until it is terminal; draws progress on stderr.
  absl::StatusOr<v1::Backfill> Follow(const std::string& id,
                                      v1::Backfill latest);
  // Prints the final job and maps its state to the exit code.
  int FinishFollow(absl::StatusOr<v1::Backfill> final_job);

  GlobalOptions globals_;
  std::unique_ptr<BackfillClient> client_;
};

// Draws the progress of a followed job on stderr: a bar redrawn in place on
// a terminal, otherwise a plain line per state change or ~10% of progress.
class ProgressReporter {
 public:
  ProgressReporter() : tty_(isatty(STDERR_FILENO) == 1), start_(absl::Now()) {}
  ~ProgressReporter() { EndLine(); }

  // The terminal's width (80 when it does not say): asked at every redraw,
  // so a resized window is followed.
  static int Columns() {
    winsize size{};
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
      return size.ws_col;
    }
    return 80;
  }

  void Update(const v1::Backfill& job) {
    double elapsed = absl::ToDoubleSeconds(absl::Now() - start_);
    if (tty_) {
      // The current step on a line of its own above the bar, each time the
      // job moves to another state.
      if (job.state() != last_state_ && !job.current_step().empty()) {
        std::cerr << "\r" << cli::TerminalText(job.current_step())
                  << "\033[K\n";
        last_state_ = job.state();
      }
      std::cerr << "\r"
                << cli::FormatProgressBarFitting(job, elapsed, Columns())
                << "\033[K" << std::flush;
      bar_drawn_ = true;
      return;
    }
    const auto& counts = job.partitions();
    int decile = counts.total() > 0
                     ? static_cast<int>(10 * cli::DonePartitions(counts) /
                                        counts.total())
                     : 0;
    if (job.state() != last_state_ || decile != last_decile_) {
      std::cerr << cli::FormatProgressLine(job, elapsed) << std::endl;
      last_state_ = job.state();
      last_decile_ = decile;
    }
  }

  // Ends the bar's line so the next message starts on a fresh line.
  void EndLine() {
    if (bar_drawn_) std::cerr << std::endl;
    bar_drawn_ = false;
  }

 private:
  bool tty_;
  absl::Time start_;
  bool bar_drawn_ = false;
  v1::BackfillState last_state_ = v1::BACKFILL_STATE_UNSPECIFIED;
  int last_decile_ = -1;
};

// Ctrl-C while following: the job keeps running on the server; say how to
// find it again. Async-signal-safe (write and _exit only).
char interrupt_message[256] = "\nbackfillctl: interrupted\n";

void OnInterrupt(int) {
  ssize_t ignored =
      write(STDERR_FILENO, interrupt_message, strlen(interrupt_message));
  (void)ignored;
  _exit(kExitInterrupted);
}

void InstallInterruptHandler(const std::string& id) {
  const std::string safe_id = cli::TerminalText(id);
  std::string message =
      absl::StrCat("\nbackfillctl: stopped following; job ", safe_id,
                   " keeps running (backfillctl watch ", safe_id, ")\n");
  if (message.size() < sizeof(interrupt_message)) {
    memcpy(interrupt_message, message.c_str(), message.size() + 1);
  }
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigaction(SIGINT, &action, nullptr);
}

// Checks the scope flags and splits --partitions into scope->partitions.
absl::Status ValidateScope(ScopeOptions* scope) {
  if (scope->from.empty() != scope->to.empty()) {
    return absl::InvalidArgumentError(
        "--from and --to go together: the range is [FROM, TO)");
  }
  absl::StatusOr<std::vector<std::string>> partitions =
      cli::SplitListFlag("--partitions", scope->partition_args);
  if (!partitions.ok()) return partitions.status();
  scope->partitions = *std::move(partitions);
  absl::StatusOr<std::vector<std::string>> keys =
      cli::SplitListFlag("--keys", scope->key_args);
  if (!keys.ok()) return keys.status();
  scope->keys = *std::move(keys);
  return absl::OkStatus();
}

// Refuses, before anything is sent, a text argument that is not UTF-8 (the
// server refuses such text fields). `arguments`: name and value.
absl::Status CheckUtf8Arguments(
    const std::vector<std::pair<std::string, std::string>>& arguments) {
  for (const auto& [name, value] : arguments) {
    if (absl::Status valid = cli::CheckUtf8(name, value); !valid.ok()) {
      return valid;
    }
  }
  return absl::OkStatus();
}

v1::BackfillRequest MakeRequest(const ScopeOptions& scope) {
  v1::BackfillRequest request;
  request.set_dataset(scope.dataset);
  request.set_from_partition(scope.from);
  request.set_to_partition(scope.to);
  for (const std::string& partition : scope.partitions) {
    request.add_partitions(partition);
  }
  request.set_exclude_downstream(scope.no_downstream);
  request.set_affected_by(scope.affected_by);
  request.set_auto_detect(scope.auto_detect);
  request.set_max_cost(scope.max_cost);
  for (const std::string& key : scope.keys) request.add_keys(key);
  request.set_override_frozen(scope.override_frozen);
  return request;
}

int Cli::RpcError(const absl::Status& status, absl::string_view more) const {
  // The server names request fields and methods in API terms; say them as
  // this CLI's flags and commands, and name the flags of refused fields the
  // message does not mention.
  std::string line = absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                                  cli::InCliTerms(status.message()));
  std::vector<std::string> flags;
  for (const RpcFieldViolation& violation : FieldViolationsOf(status)) {
    std::optional<std::string> flag = cli::FlagOfField(violation.field);
    if (!flag.has_value() || absl::StrContains(line, *flag) ||
        std::find(flags.begin(), flags.end(), *flag) != flags.end()) {
      continue;
    }
    flags.push_back(*flag);
  }
  if (!flags.empty()) {
    absl::StrAppend(&line, " (", absl::StrJoin(flags, ", "), ")");
  }
  if (status.code() == absl::StatusCode::kUnavailable) {
    absl::StrAppend(&line, "; is backfilld running at ", globals_.server, "?");
    if (absl::StrContains(status.message(), "Socket closed")) {
      // A server that closes the connection at once often wants TLS, or a
      // client certificate.
      absl::StrAppend(&line,
                      globals_.security.tls
                          ? " (if it requires a client certificate, give "
                            "--tls-cert and --tls-key)"
                          : " (if it serves TLS, give --tls-ca)");
    }
  } else if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    absl::StrAppend(&line, " (after ", globals_.timeout_seconds,
                    " s; raise with --timeout)");
  } else if (status.code() == absl::StatusCode::kUnauthenticated) {
    absl::StrAppend(&line,
                    globals_.token.empty()
                        ? " (no token was sent: give one with "
                          "$BACKFILL_TOKEN or --token)"
                        : " (the token given with $BACKFILL_TOKEN or --token "
                          "was refused)");
  }
  absl::StrAppend(&line, more);
  return Fail(kExitFailure, line);
}

int Cli::Print(const google::protobuf::Message& message,
               const std::string& human) const {
  if (!globals_.json) {
    std::cout << human << std::flush;
    return kExitOk;
  }
  absl::StatusOr<std::string> json = cli::ToJson(message);
  if (!json.ok()) return Fail(kExitFailure, json.status().message());
  std::cout << *json;
  if (json->empty() || json->back() != '\n') std::cout << "\n";
  std::cout << std::flush;
  return kExitOk;
}

int Cli::Health(bool answering) {
  absl::StatusOr<bool> serving =
      client_->CheckHealth(v1::BackfillService::service_full_name());
  if (!serving.ok()) return RpcError(serving.status());
  std::cout << (*serving ? "SERVING" : "NOT_SERVING") << std::endl;
  return *serving || answering ? kExitOk : kExitFailure;
}

int Cli::Datasets() {
  absl::StatusOr<v1::ListDatasetsResponse> response = client_->ListDatasets();
  if (!response.ok()) return RpcError(response.status());
  return Print(*response, cli::FormatDatasets(*response));
}

int Cli::Plan(const ScopeOptions& scope) {
  absl::StatusOr<v1::PlanBackfillResponse> response =
      client_->Plan(MakeRequest(scope));
  if (!response.ok()) return RpcError(response.status());
  return Print(*response, cli::FormatPlan(*response));
}

int Cli::Submit(const ScopeOptions& scope, const SubmitOptions& options) {
  v1::SubmitBackfillRequest submit;
  v1::BackfillRequest& request = *submit.mutable_request();
  request = MakeRequest(scope);
  request.set_reason(options.reason);
  request.set_ticket(options.ticket);
  request.set_requested_by(options.requested_by);
  request.set_priority(options.priority);
  request.set_max_parallel(options.max_parallel);
  // Always a key, so that a retry (ours below, or the user's) can never
  // make a second job.
  const bool own_key = options.idempotency_key.empty();
  const std::string key = own_key ? NewRandomUuid() : options.idempotency_key;
  submit.set_idempotency_key(key);
  submit.set_no_wait(options.no_wait);

  SubmitRetryOptions retry;
  retry.on_retry = [](const SubmitRetry& failed) {
    std::cerr << "backfillctl: submit attempt " << failed.attempt << " of "
              << failed.max_attempts << " failed ("
              << absl::StatusCodeToString(failed.status.code()) << ": "
              << cli::TerminalText(absl::StrReplaceAll(
                     failed.status.message(), {{"\n", " "}, {"\r", " "}}))
              << "); retrying in " << absl::FormatDuration(failed.backoff)
              << " with the same idempotency key \""
              << cli::TerminalText(failed.idempotency_key) << "\"" << std::endl;
  };
  absl::StatusOr<v1::SubmitBackfillResponse> response =
      client_->SubmitWithRetries(submit, retry);
  if (!response.ok()) {
    if (!IsRetryableSubmitError(response.status())) {
      return RpcError(response.status());
    }
    // The job may exist: the last attempt's answer may have been lost.
    return RpcError(
        response.status(),
        absl::StrCat(" (gave up after ", retry.max_attempts,
                     " attempts; the job may have been created: submit again "
                     "with --idempotency-key ",
                     key, " to get it without creating another)"));
  }
  const v1::Backfill& job = response->backfill();
  std::string headline;
  if (response->created()) {
    headline = absl::StrCat("submitted backfill ", job.id());
  } else if (own_key) {
    // Nobody else knows this key: an attempt of ours made the job.
    headline = absl::StrCat("submitted backfill ", job.id(),
                            " (by an earlier attempt whose answer was lost)");
  } else {
    headline = absl::StrCat("backfill ", job.id(),
                            " already exists for idempotency key \"",
                            options.idempotency_key, "\" (nothing submitted)");
  }
  headline = cli::TerminalText(headline);
  if (!options.wait) {
    return Print(*response,
                 absl::StrCat(headline, "\n\n", cli::FormatBackfill(job)));
  }
  std::cerr << headline << "; waiting for it to finish" << std::endl;
  return FinishFollow(Follow(job.id(), job));
}

int Cli::Status(const std::string& id) {
  absl::StatusOr<v1::Backfill> job = client_->Get(id);
  if (!job.ok()) return RpcError(job.status());
  return Print(*job, cli::FormatBackfill(*job));
}

int Cli::List(const ListOptions& options) {
  v1::ListBackfillsRequest request;
  absl::StatusOr<std::vector<std::string>> states =
      cli::SplitListFlag("--state", options.state_args);
  if (!states.ok()) return Fail(kExitUsage, states.status().message());
  for (const std::string& text : *states) {
    absl::StatusOr<v1::BackfillState> state = cli::ParseState(text);
    if (!state.ok()) {
      return Fail(kExitUsage,
                  absl::StrCat("--state: ", state.status().message()));
    }
    request.add_states(*state);
  }
  request.set_dataset(options.dataset);
  request.set_view(options.full ? v1::BACKFILL_VIEW_FULL
                                : v1::BACKFILL_VIEW_BASIC);
  const int64_t limit = options.limit > 0 ? options.limit : kDefaultListLimit;
  // Page after page, into one response (one JSON document with --json),
  // until the limit or the last page.
  v1::ListBackfillsResponse all;
  bool more = false;
  while (true) {
    const int64_t wanted =
        options.all
            ? kListPageSize
            : std::min<int64_t>(kListPageSize, limit - all.backfills_size());
    request.set_page_size(static_cast<int>(wanted));
    absl::StatusOr<v1::ListBackfillsResponse> page = client_->List(request);
    if (!page.ok()) return RpcError(page.status());
    for (v1::Backfill& job : *page->mutable_backfills()) {
      *all.add_backfills() = std::move(job);
    }
    if (page->next_page_token().empty()) break;
    if (!options.all && all.backfills_size() >= limit) {
      more = true;
      break;
    }
    request.set_page_token(page->next_page_token());
  }
  if (more) {
    std::cerr << "backfillctl: the newest " << all.backfills_size()
              << " jobs are shown; more match (--limit N or --all for more)"
              << std::endl;
  }
  return Print(all, cli::FormatBackfills(all));
}

int Cli::Partitions(const PartitionsOptions& options) {
  v1::ListPartitionsRequest request;
  request.set_backfill_id(options.id);
  request.set_dataset(options.dataset);
  absl::StatusOr<std::vector<std::string>> states =
      cli::SplitListFlag("--state", options.state_args);
  if (!states.ok()) return Fail(kExitUsage, states.status().message());
  for (const std::string& text : *states) {
    absl::StatusOr<v1::PartitionState> state = cli::ParsePartitionState(text);
    if (!state.ok()) {
      return Fail(kExitUsage,
                  absl::StrCat("--state: ", state.status().message()));
    }
    request.add_states(*state);
  }
  request.set_page_size(kListPageSize);
  // Every page, into one response (one JSON document with --json).
  v1::ListPartitionsResponse all;
  while (true) {
    absl::StatusOr<v1::ListPartitionsResponse> page =
        client_->ListPartitions(request);
    if (!page.ok()) return RpcError(page.status());
    for (v1::BackfillPartition& p : *page->mutable_partitions()) {
      *all.add_partitions() = std::move(p);
    }
    if (page->next_page_token().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  return Print(all, cli::FormatPartitions(all));
}

int Cli::Watch(const std::string& id) {
  return FinishFollow(Follow(id, v1::Backfill()));
}

int Cli::Decide(JobAction action, const JobOptions& options) {
  absl::StatusOr<v1::Backfill> job;
  switch (action) {
    case JobAction::kCancel:
      job = client_->Cancel(options.id, options.reason);
      break;
    case JobAction::kPause:
      job = client_->Pause(options.id, options.reason);
      break;
    case JobAction::kResume:
      job = client_->Resume(options.id, options.reason);
      break;
    case JobAction::kRetry:
      job = client_->Retry(options.id, options.reason);
      break;
  }
  if (!job.ok()) return RpcError(job.status());
  return Print(*job, cli::FormatBackfill(*job));
}

int Cli::Rollback(const std::string& id, const RollbackOptions& options) {
  v1::RollbackBackfillRequest request;
  request.set_id(id);
  request.set_reason(options.reason);
  request.set_requested_by(options.requested_by.empty()
                               ? cli::DefaultRequestedBy()
                               : options.requested_by);
  request.set_force(options.force);
  absl::StatusOr<v1::Backfill> job = client_->Rollback(request);
  if (!job.ok()) return RpcError(job.status());
  return Print(*job, cli::FormatBackfill(*job));
}

int Cli::Confirm(const std::string& id, bool wait) {
  absl::StatusOr<v1::Backfill> job = client_->Confirm(id);
  if (!job.ok()) return RpcError(job.status());
  if (!wait) return Print(*job, cli::FormatBackfill(*job));
  std::cerr << cli::TerminalText(absl::StrCat(
                   "confirming the downstream consumers of backfill ",
                   job->id(), " again; waiting for the result"))
            << std::endl;
  return FinishFollow(Follow(job->id(), *job));
}

int Cli::Approve(const ApproveOptions& options) {
  v1::ApproveBackfillRequest request;
  request.set_id(options.id);
  request.set_reason(options.reason);
  request.set_override_validation(options.override_validation);
  request.set_approved_by(options.approved_by);
  absl::StatusOr<v1::Backfill> job = client_->Approve(request);
  if (!job.ok()) return RpcError(job.status());
  return Print(*job, absl::StrCat(cli::TerminalText(absl::StrCat(
                                      "approved backfill ", job->id(),
                                      "; it is ", cli::StateName(job->state()),
                                      " (backfillctl watch ", job->id(),
                                      " follows it)")),
                                  "\n\n", cli::FormatBackfill(*job)));
}

int Cli::Diff(const DiffOptions& options) {
  // Every page, merged into one response (one JSON document with --json).
  v1::DiffBackfillRequest request;
  request.set_id(options.id);
  request.set_dataset(options.dataset);
  request.set_sample_rows(options.samples);
  v1::DiffBackfillResponse all;
  while (true) {
    absl::StatusOr<v1::DiffBackfillResponse> page = client_->Diff(request);
    if (!page.ok()) return RpcError(page.status());
    if (request.page_token().empty()) {
      all = *page;
    } else {
      for (const v1::PartitionDiff& p : page->partitions()) {
        *all.add_partitions() = p;
      }
    }
    if (page->next_page_token().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  all.clear_next_page_token();
  return Print(all, cli::FormatDiff(all));
}

int Cli::Why(const WhyOptions& options) {
  absl::StatusOr<v1::ExplainPartitionResponse> response =
      client_->ExplainPartition(options.dataset, options.partition);
  if (!response.ok()) return RpcError(response.status());
  return Print(*response, cli::FormatPartitionHistory(*response));
}

int Cli::Audit(const AuditOptions& options) {
  v1::ListAuditEventsRequest request;
  if (!options.since.empty()) {
    absl::StatusOr<google::protobuf::Timestamp> since =
        cli::ParseSince(options.since);
    if (!since.ok()) return Fail(kExitUsage, since.status().message());
    *request.mutable_since() = *since;
  }
  request.set_backfill_id(options.job);
  request.set_page_size(1000);
  // Every page: one JSON line per event as it comes, or (--json) one
  // document with them all.
  v1::ListAuditEventsResponse all;
  while (true) {
    absl::StatusOr<v1::ListAuditEventsResponse> page =
        client_->ListAuditEvents(request);
    if (!page.ok()) return RpcError(page.status());
    for (const v1::AuditEvent& event : page->events()) {
      if (globals_.json) {
        *all.add_events() = event;
        continue;
      }
      absl::StatusOr<std::string> line = cli::AuditEventJsonLine(event);
      if (!line.ok()) return Fail(kExitFailure, line.status().message());
      std::cout << *line;
    }
    if (page->next_page_token().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  if (globals_.json) return Print(all, "");
  std::cout << std::flush;
  return kExitOk;
}

absl::StatusOr<v1::Backfill> Cli::Follow(const std::string& id,
                                         v1::Backfill latest) {
  InstallInterruptHandler(id);
  ProgressReporter progress;
  // A job waiting for an operator (AWAITING_APPROVAL) ends the follow too:
  // nothing happens until someone decides.
  auto settled = [](const v1::Backfill& job) {
    return cli::IsTerminal(job.state()) || cli::WaitsForOperator(job.state());
  };
  if (!latest.id().empty()) progress.Update(latest);
  if (settled(latest)) return latest;

  absl::Status stream = client_->Watch(id, [&](const v1::Backfill& job) {
    latest = job;
    progress.Update(job);
    return !settled(job);
  });
  if (settled(latest)) return latest;
  // The stream failed or ended early. Without having seen the job at all,
  // its error is the answer (unknown id, server down).
  if (latest.id().empty() &&
      stream.code() != absl::StatusCode::kUnimplemented) {
    if (stream.ok()) {
      return absl::InternalError("watch stream ended without any update");
    }
    return stream;
  }
  progress.EndLine();
  std::cerr << "backfillctl: watch stream ended ("
            << (stream.ok() ? "OK" : absl::StatusCodeToString(stream.code()))
            << "); polling every " << absl::FormatDuration(kPollInterval)
            << std::endl;

  absl::Time last_success = absl::Now();
  while (true) {
    absl::SleepFor(kPollInterval);
    absl::StatusOr<v1::Backfill> job = client_->Get(id);
    if (!job.ok()) {
      bool transient =
          job.status().code() == absl::StatusCode::kUnavailable ||
          job.status().code() == absl::StatusCode::kDeadlineExceeded;
      if (!transient || latest.id().empty() ||
          absl::Now() - last_success > kPollOutageTolerance) {
        return job.status();
      }
      continue;
    }
    last_success = absl::Now();
    latest = *job;
    progress.Update(latest);
    if (settled(latest)) return latest;
  }
}

int Cli::FinishFollow(absl::StatusOr<v1::Backfill> final_job) {
  signal(SIGINT, SIG_DFL);
  if (!final_job.ok()) return RpcError(final_job.status());
  // Watch updates leave out the plan's partition lists: print the whole job.
  if (absl::StatusOr<v1::Backfill> whole = client_->Get(final_job->id());
      whole.ok()) {
    final_job = *std::move(whole);
  }
  int code = Print(*final_job, cli::FormatBackfill(*final_job));
  if (code != kExitOk) return code;
  if (final_job->state() == v1::BACKFILL_STATE_SUCCEEDED) return kExitOk;
  if (cli::WaitsForOperator(final_job->state())) {
    const std::string id = cli::TerminalText(final_job->id());
    std::cerr << "backfillctl: job " << id
              << " is AWAITING_APPROVAL: nothing is published until it is "
                 "approved. Read its diff (backfillctl diff "
              << id << "), then backfillctl approve " << id
              << " --reason \"...\" (or backfillctl cancel " << id << ")"
              << std::endl;
    return kExitFailure;
  }
  std::cerr << "backfillctl: job " << cli::TerminalText(final_job->id())
            << (cli::IsTerminal(final_job->state()) ? " ended " : " is ")
            << cli::StateName(final_job->state()) << std::endl;
  return kExitFailure;
}

// The first word of the command line that is neither a flag nor a global
// flag's value: what the user meant as the subcommand.
std::string FirstPositional(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if ((arg == "--server" || arg == "--timeout" || arg == "--token" ||
         arg == "--tls-ca" || arg == "--tls-cert" || arg == "--tls-key") &&
        i + 1 < argc) {
      ++i;
    } else if (!arg.empty() && arg[0] != '-') {
      return std::string(arg);
    }
  }
  return "";
}

int Main(int argc, char** argv) {
  std::unique_ptr<cli::CommandLine> line = cli::NewCommandLine();
  CLI::App& app = line->app;
  GlobalOptions& globals = line->globals;
  ScopeOptions& scope = line->scope;
  SubmitOptions& submit_options = line->submit_options;
  ListOptions& list_options = line->list_options;
  PartitionsOptions& partitions_options = line->partitions_options;
  JobOptions& job = line->job;
  RollbackOptions& rollback_options = line->rollback_options;
  ApproveOptions& approve_options = line->approve_options;
  DiffOptions& diff_options = line->diff_options;
  WhyOptions& why_options = line->why_options;
  AuditOptions& audit_options = line->audit_options;
  const bool& confirm_no_wait = line->confirm_no_wait;
  CLI::App* const datasets = line->datasets;
  CLI::App* const plan = line->plan;
  CLI::App* const submit = line->submit;
  CLI::App* const status = line->status;
  CLI::App* const list = line->list;
  CLI::App* const partitions = line->partitions;
  CLI::App* const watch = line->watch;
  CLI::App* const cancel = line->cancel;
  CLI::App* const pause = line->pause;
  CLI::App* const resume = line->resume;
  CLI::App* const retry = line->retry;
  CLI::App* const rollback = line->rollback;
  CLI::App* const approve = line->approve;
  CLI::App* const diff = line->diff;
  CLI::App* const why = line->why;
  CLI::App* const audit = line->audit;
  CLI::App* const confirm = line->confirm;
  CLI::Option* const max_parallel = line->max_parallel;

  const std::vector<std::pair<CLI::App*, JobAction>> decisions = {
      {cancel, JobAction::kCancel},
      {pause, JobAction::kPause},
      {resume, JobAction::kResume},
      {retry, JobAction::kRetry}};

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      return app.exit(e);  // --help
    }
    const std::vector<CLI::App*> parsed = app.get_subcommands();
    const std::string hint =
        cli::DidYouMean(app, parsed.empty() ? nullptr : parsed.front(),
                        std::vector<std::string>(argv + 1, argv + argc));
    const std::string and_hint = hint.empty() ? "" : absl::StrCat("; ", hint);
    if (parsed.empty()) {
      std::string word = FirstPositional(argc, argv);
      if (!word.empty()) {
        return Fail(kExitUsage,
                    absl::StrCat("unknown subcommand \"", word, "\"", and_hint,
                                 " (see backfillctl --help)"));
      }
    }
    std::string help = "backfillctl";
    for (const CLI::App* command : parsed) {
      absl::StrAppend(&help, " ", command->get_name());
    }
    return Fail(kExitUsage,
                absl::StrCat(e.what(), and_hint, " (see ", help, " --help)"));
  }

  if (line->completion->parsed()) {
    const std::string& shell = line->completion_options.shell;
    std::cout << (shell == "zsh" ? cli::ZshCompletion(app)
                                 : cli::BashCompletion(app));
    return kExitOk;
  }

  if (absl::Status read = ReadTlsFiles(&globals); !read.ok()) {
    return Fail(kExitUsage, read.message());
  }

  std::vector<std::pair<std::string, std::string>> texts;
  if (plan->parsed() || submit->parsed()) {
    texts.insert(texts.end(), {{"DATASET", scope.dataset},
                               {"--from", scope.from},
                               {"--to", scope.to},
                               {"--affected-by", scope.affected_by}});
    for (const std::string& value : scope.partition_args) {
      texts.emplace_back("--partitions", value);
    }
    for (const std::string& value : scope.key_args) {
      texts.emplace_back("--keys", value);
    }
  }
  if (submit->parsed()) {
    texts.insert(texts.end(),
                 {{"--reason", submit_options.reason},
                  {"--ticket", submit_options.ticket},
                  {"--idempotency-key", submit_options.idempotency_key},
                  {"--requested-by", submit_options.requested_by}});
  }
  bool decision = false;
  for (const auto& [command, action] : decisions) {
    decision = decision || command->parsed();
  }
  if (status->parsed() || watch->parsed() || decision || rollback->parsed() ||
      confirm->parsed()) {
    texts.emplace_back("JOB", job.id);
  }
  if (decision) texts.emplace_back("--reason", job.reason);
  if (rollback->parsed()) {
    texts.insert(texts.end(),
                 {{"--reason", rollback_options.reason},
                  {"--requested-by", rollback_options.requested_by}});
  }
  if (approve->parsed()) {
    texts.insert(texts.end(), {{"JOB", approve_options.id},
                               {"--reason", approve_options.reason},
                               {"--approved-by", approve_options.approved_by}});
  }
  if (diff->parsed()) {
    texts.insert(texts.end(), {{"JOB", diff_options.id},
                               {"--dataset", diff_options.dataset}});
  }
  if (why->parsed()) {
    texts.insert(texts.end(), {{"DATASET", why_options.dataset},
                               {"PARTITION", why_options.partition}});
  }
  if (audit->parsed()) {
    texts.insert(texts.end(), {{"--since", audit_options.since},
                               {"--job", audit_options.job}});
  }
  if (list->parsed()) {
    for (const std::string& value : list_options.state_args) {
      texts.emplace_back("--state", value);
    }
    texts.emplace_back("--dataset", list_options.dataset);
  }
  if (partitions->parsed()) {
    texts.emplace_back("JOB", partitions_options.id);
    for (const std::string& value : partitions_options.state_args) {
      texts.emplace_back("--state", value);
    }
    texts.emplace_back("--dataset", partitions_options.dataset);
  }
  if (absl::Status valid = CheckUtf8Arguments(texts); !valid.ok()) {
    return Fail(kExitUsage, valid.message());
  }
  if (plan->parsed() || submit->parsed()) {
    absl::Status valid = ValidateScope(&scope);
    if (!valid.ok()) return Fail(kExitUsage, valid.message());
    if (!std::isfinite(scope.max_cost) || scope.max_cost < 0) {
      return Fail(kExitUsage,
                  absl::StrCat("--max-cost ", scope.max_cost,
                               " is out of range: give a number of input rows "
                               ">= 0 (leave it out for no limit)"));
    }
  }
  if (submit->parsed() &&
      absl::StripAsciiWhitespace(submit_options.reason).empty()) {
    return Fail(kExitUsage,
                "submit requires --reason \"why this backfill runs\" (it is "
                "recorded in the job and in lineage)");
  }
  if (rollback->parsed() &&
      absl::StripAsciiWhitespace(rollback_options.reason).empty()) {
    return Fail(kExitUsage,
                "rollback requires --reason \"why the job's data is "
                "withdrawn\" (it is recorded in the job, the audit log and "
                "lineage)");
  }
  if (submit->parsed() && (submit_options.priority < -kMaxPriority ||
                           submit_options.priority > kMaxPriority)) {
    return Fail(kExitUsage,
                absl::StrCat("--priority ", submit_options.priority,
                             " is out of range: use -", kMaxPriority, "..",
                             kMaxPriority, " (default 0; higher runs first)"));
  }
  if (submit->parsed() && max_parallel->count() > 0 &&
      submit_options.max_parallel < 1) {
    return Fail(kExitUsage,
                absl::StrCat("--max-parallel ", submit_options.max_parallel,
                             " is out of range: use 1 or more (leave it out "
                             "for no limit of the job's own)"));
  }

  if (approve->parsed() &&
      absl::StripAsciiWhitespace(approve_options.reason).empty()) {
    return Fail(kExitUsage,
                "approve requires --reason \"why publishing this job is "
                "right\" (it is recorded in the audit log and in lineage)");
  }

  Cli cli(globals);
  if (line->health->parsed()) {
    return cli.Health(line->health_options.answering);
  }
  if (datasets->parsed()) return cli.Datasets();
  if (plan->parsed()) return cli.Plan(scope);
  if (submit->parsed()) return cli.Submit(scope, submit_options);
  if (status->parsed()) return cli.Status(job.id);
  if (list->parsed()) return cli.List(list_options);
  if (partitions->parsed()) return cli.Partitions(partitions_options);
  if (watch->parsed()) return cli.Watch(job.id);
  if (approve->parsed()) return cli.Approve(approve_options);
  if (diff->parsed()) return cli.Diff(diff_options);
  if (why->parsed()) return cli.Why(why_options);
  if (audit->parsed()) return cli.Audit(audit_options);
  for (const auto& [command, action] : decisions) {
    if (command->parsed()) return cli.Decide(action, job);
  }
  if (rollback->parsed()) return cli.Rollback(job.id, rollback_options);
  if (confirm->parsed()) return cli.Confirm(job.id, !confirm_no_wait);
  return Fail(kExitUsage, "no subcommand (see backfillctl --help)");
}

}  // namespace
}  // namespace backfill

int main(int argc, char** argv) { return backfill::Main(argc, argv); }
