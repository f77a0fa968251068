// backfillctl: the operator CLI of backfilld. See docs/cli.md.
//
// Parses the command line (client/cli_command_line.h), checks what can be
// checked before anything is sent, and runs one command: those about
// datasets and jobs (client/cli_job_commands.h) or about replay policies
// (client/cli_policy_commands.h). Exit codes: client/cli_output.h.

#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/cli_args.h"
#include "client/cli_command_line.h"
#include "client/cli_completion.h"
#include "client/cli_job_commands.h"
#include "client/cli_output.h"
#include "client/cli_policy_commands.h"
#include "client/cli_suggest.h"

namespace backfill {
namespace {

// --priority is -kMaxPriority..kMaxPriority, as the server requires.
constexpr int kMaxPriority = 1000;

using cli::ApproveOptions;
using cli::AuditOptions;
using cli::DiffOptions;
using cli::Fail;
using cli::FreshnessOptions;
using cli::GlobalOptions;
using cli::JobAction;
using cli::JobOptions;
using cli::kExitOk;
using cli::kExitUsage;
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
  FreshnessOptions& freshness_options = line->freshness_options;
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
  CLI::App* const freshness = line->freshness;
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
  if (line->policies->parsed()) {
    const cli::PolicyOptions& p = line->policy_options;
    texts.insert(texts.end(), {{"DATASET", p.dataset},
                               {"--reason", p.reason},
                               {"--requested-by", p.requested_by}});
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
  if (freshness->parsed()) {
    texts.emplace_back("DATASET", freshness_options.dataset);
    for (const std::string& value : freshness_options.only_args) {
      texts.emplace_back("--only", value);
    }
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

  if (line->policies->parsed()) {
    const std::string usage = cli::CheckPolicyOptions(line->policy_options);
    if (!usage.empty()) return Fail(kExitUsage, usage);
    return cli::PolicyCommands(globals).Run(line->policy_options);
  }

  cli::JobCommands cli(globals);
  if (line->health->parsed()) {
    return cli.Health(line->health_options.answering);
  }
  if (line->nodes->parsed()) return cli.Nodes();
  if (datasets->parsed()) return cli.Datasets();
  if (plan->parsed()) return cli.Plan(scope);
  if (submit->parsed()) return cli.Submit(scope, submit_options);
  if (status->parsed()) return cli.Status(job.id);
  if (list->parsed()) return cli.List(list_options);
  if (partitions->parsed()) return cli.Partitions(partitions_options);
  if (freshness->parsed()) return cli.Freshness(freshness_options);
  if (watch->parsed()) return cli.Watch(job.id);
  if (approve->parsed()) return cli.Approve(approve_options);
  if (diff->parsed()) return cli.Diff(diff_options);
  if (why->parsed()) return cli.Why(why_options);
  if (audit->parsed()) return cli.Audit(audit_options);
  for (const auto& [command, action] : decisions) {
    if (command->parsed()) return cli.Decide(action, job);
  }
  if (rollback->parsed()) return cli.Rollback(job.id, rollback_options);
  if (confirm->parsed()) {
    return cli.Confirm(job.id, job.reason, !confirm_no_wait);
  }
  return Fail(kExitUsage, "no subcommand (see backfillctl --help)");
}

}  // namespace
}  // namespace backfill

int main(int argc, char** argv) { return backfill::Main(argc, argv); }
