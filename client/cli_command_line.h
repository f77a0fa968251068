// CommandLine: backfillctl's command line, the one table of its
// subcommands, flags, help texts and examples. Main() parses with it, the
// shell completion scripts (cli_completion.h) are generated from it, and
// tests parse the examples of every subcommand's --help with it, so help,
// completion and parser cannot drift apart.
//
// A CommandLine owns its CLI11 App and the option values the App writes
// when it parses; it does not move (the App holds pointers into it). Not
// thread-safe: parse one command line per CommandLine.

#ifndef BACKFILL_CLIENT_CLI_COMMAND_LINE_H_
#define BACKFILL_CLIENT_CLI_COMMAND_LINE_H_

#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "client/backfill_client.h"

namespace backfill {
namespace cli {

constexpr char kDefaultServer[] = "127.0.0.1:50051";
// How many values one occurrence of a list flag may take ("--partitions a b").
constexpr int kMaxValuesPerFlag = 1 << 20;

struct GlobalOptions {
  std::string server = kDefaultServer;
  bool json = false;
  double timeout_seconds = 30;
  // Sent as "authorization: Bearer <token>" with every call ("": none).
  std::string token;
  // --tls-ca, --tls-cert, --tls-key: files; any of them turns TLS on.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  ChannelSecurity security;  // read from those files before any call
};

struct ScopeOptions {
  std::string dataset;
  std::string from;
  std::string to;
  // The values of --partitions as typed, one per occurrence ("a,b").
  std::vector<std::string> partition_args;
  // Their items (ValidateScope), sent as they are.
  std::vector<std::string> partitions;
  bool no_downstream = false;
  // --affected-by "DATASET: PREDICATE", sent as typed.
  std::string affected_by;
  bool auto_detect = false;  // --auto
  double max_cost = 0;       // --max-cost; 0: not given
  // The values of --keys as typed, and their items (ValidateScope).
  std::vector<std::string> key_args;
  std::vector<std::string> keys;
  // --override-frozen: plan the partitions frozen rules close too.
  bool override_frozen = false;
};

struct SubmitOptions {
  std::string reason;
  std::string ticket;
  // Empty: a random UUID is sent.
  std::string idempotency_key;
  std::string requested_by;
  bool wait = false;
  bool no_wait = false;
  int priority = 0;
  int max_parallel = 0;  // 0: not given
};

// `list` shows this many jobs unless --limit or --all says otherwise.
constexpr int kDefaultListLimit = 50;
// Jobs or partitions asked for per page (the server's maximum).
constexpr int kListPageSize = 1000;

struct ListOptions {
  // The values of --state as typed, one per occurrence ("running,queued").
  std::vector<std::string> state_args;
  std::string dataset;
  int limit = 0;  // 0: kDefaultListLimit
  bool all = false;
  bool full = false;
};

struct PartitionsOptions {
  std::string id;
  std::string dataset;
  // The values of --state as typed, one per occurrence ("failed,pending").
  std::vector<std::string> state_args;
};

struct FreshnessOptions {
  std::string dataset;
  // The values of --only as typed, one per occurrence ("stale,due").
  std::vector<std::string> only_args;
};

struct JobOptions {
  std::string id;
  std::string reason;
};

struct RollbackOptions {
  std::string reason;
  std::string requested_by;
  bool force = false;
};

struct ApproveOptions {
  std::string id;
  std::string reason;
  std::string approved_by;
  bool override_validation = false;
};

struct DiffOptions {
  std::string id;
  std::string dataset;
  int samples = 3;
};

struct WhyOptions {
  std::string dataset;
  std::string partition;
};

struct AuditOptions {
  std::string since;  // "" : from the first event
  std::string job;
};

struct PolicyOptions {
  std::string action;   // "", "check", "pause" or "resume"
  std::string dataset;  // check: "" for every policy
  bool submit = false;  // check --submit
  std::string reason;   // pause --reason
  std::string requested_by;
};

struct HealthOptions {
  // --answering: succeed whenever the server answers, SERVING or not.
  bool answering = false;
};

struct CompletionOptions {
  std::string shell;  // "bash" or "zsh"
};

// Who asks, by default: $USER, else the login name, else "unknown".
std::string DefaultRequestedBy();

// One example of a subcommand's --help: a whole command line, as typed in
// a shell, and what it does.
struct Example {
  std::string command;  // "backfillctl plan daily_revenue ..."
  std::string what;
};

// The examples shown in the --help of subcommand `name` (none for an
// unknown name).
const std::vector<Example>& ExamplesOf(const std::string& name);

// The version line --version prints: "backfillctl VERSION (commit C) API
// backfill.v1", the commit only when the build knew it.
std::string VersionText();

struct CommandLine {
  CLI::App app{
      "backfillctl: plan, submit and follow backfills of backfilld.\n"
      "Global flags (--server, --token, --json, --timeout) go before or "
      "after the subcommand.",
      "backfillctl"};

  GlobalOptions globals;
  ScopeOptions scope;
  SubmitOptions submit_options;
  ListOptions list_options;
  PartitionsOptions partitions_options;
  FreshnessOptions freshness_options;
  JobOptions job;
  RollbackOptions rollback_options;
  ApproveOptions approve_options;
  DiffOptions diff_options;
  WhyOptions why_options;
  AuditOptions audit_options;
  PolicyOptions policy_options;
  bool confirm_no_wait = false;
  HealthOptions health_options;
  CompletionOptions completion_options;

  // The subcommands, owned by `app`.
  CLI::App* datasets = nullptr;
  CLI::App* plan = nullptr;
  CLI::App* submit = nullptr;
  CLI::App* status = nullptr;
  CLI::App* list = nullptr;
  CLI::App* partitions = nullptr;
  CLI::App* freshness = nullptr;
  CLI::App* watch = nullptr;
  CLI::App* cancel = nullptr;
  CLI::App* pause = nullptr;
  CLI::App* resume = nullptr;
  CLI::App* retry = nullptr;
  CLI::App* rollback = nullptr;
  CLI::App* approve = nullptr;
  CLI::App* diff = nullptr;
  CLI::App* why = nullptr;
  CLI::App* audit = nullptr;
  CLI::App* policies = nullptr;
  CLI::App* confirm = nullptr;
  CLI::App* nodes = nullptr;
  CLI::App* health = nullptr;
  CLI::App* completion = nullptr;
  // submit's --max-parallel (whether it was given counts).
  CLI::Option* max_parallel = nullptr;
};

// Builds backfillctl's whole command line: global flags, --version, every
// subcommand with its flags, help and examples.
std::unique_ptr<CommandLine> NewCommandLine();

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_CLI_COMMAND_LINE_H_
