#include "client/cli_command_line.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backfill/v1/backfill.pb.h"
#include "client/cli_version.h"

namespace backfill {
namespace cli {
namespace {

void AddScopeOptions(CLI::App* command, ScopeOptions* scope) {
  command->add_option("DATASET", scope->dataset, "Dataset to recompute")
      ->required();
  CLI::Option* from = command->add_option(
      "--from", scope->from, "First partition of the range (inclusive)");
  CLI::Option* to = command->add_option(
      "--to", scope->to, "End of the range (exclusive): [FROM, TO)");
  // Each value is kept as typed and split by ValidateScope(), which refuses
  // empty items: CLI11's own splitting (delimiter(',')) and its "[a,b]" list
  // syntax (allow_extra_args) silently drop them. Like CLI11's default for
  // a list, one occurrence may still take several values (--partitions a b).
  CLI::Option* partitions =
      command
          ->add_option("--partitions", scope->partition_args,
                       "Explicit partitions, comma-separated (p1,p2,...)")
          ->allow_extra_args(false)
          ->expected(1, kMaxValuesPerFlag);
  partitions->excludes(from)->excludes(to);
  CLI::Option* affected_by = command->add_option(
      "--affected-by", scope->affected_by,
      "\"DATASET: PREDICATE\": the partitions affected by those of DATASET "
      "(this dataset or an upstream) holding a row where the SQL PREDICATE "
      "is true, e.g. \"orders: refund > 0\" (read-only; at most 4096 bytes)");
  affected_by->excludes(from)->excludes(to)->excludes(partitions);
  CLI::Option* auto_detect = command->add_flag(
      "--auto", scope->auto_detect,
      "Every published partition whose recorded lineage no longer matches: "
      "its transform version changed, or an input it read changed since "
      "(sets auto_detect)");
  auto_detect->excludes(from)
      ->excludes(to)
      ->excludes(partitions)
      ->excludes(affected_by);
  command->add_flag("--no-downstream", scope->no_downstream,
                    "Do not recompute dependents (sets exclude_downstream)");
  command->add_option("--max-cost", scope->max_cost,
                      "Budget in input rows: refuse the backfill when its "
                      "estimated cost is above N");
  command
      ->add_option("--keys", scope->key_args,
                   "Entity keys, comma-separated (K1,K2,...): replace only "
                   "the rows of these keys (the dataset must declare "
                   "entity_key)")
      ->allow_extra_args(false)
      ->expected(1, kMaxValuesPerFlag);
  command->add_flag(
      "--override-frozen", scope->override_frozen,
      "Also recompute the partitions that their datasets' `frozen:` rules "
      "close, which are otherwise left out (submit: approver role; sets "
      "override_frozen)");
}

// The examples of every subcommand's --help, in the order of the help.
const std::vector<std::pair<std::string, std::vector<Example>>>& AllExamples() {
  static const auto* const examples =
      new std::vector<std::pair<std::string, std::vector<Example>>>{
          {"datasets",
           {{"backfillctl datasets", "The datasets the daemon declares"},
            {"backfillctl --server backfilld.example:50051 --tls-ca ca.crt "
             "--json datasets",
             "The same as JSON, from a daemon that serves TLS"}}},
          {"plan",
           {{"backfillctl plan daily_revenue --from 2025-03-01 --to "
             "2025-04-01",
             "What recomputing March would do and cost"},
            {"backfillctl plan daily_revenue --partitions "
             "2025-03-07,2025-03-08 --no-downstream",
             "Two partitions, without the datasets that read them"},
            {"backfillctl plan daily_revenue --affected-by \"orders: refund "
             "> 0\"",
             "The partitions fed by orders rows with a refund"},
            {"backfillctl plan daily_revenue --auto",
             "Every partition whose lineage no longer matches"}}},
          {"submit",
           {{"backfillctl submit daily_revenue --from 2025-03-01 --to "
             "2025-04-01 --reason \"refunds were not subtracted\" --ticket "
             "INC-1234 --wait",
             "Recompute March and follow the job to its end"},
            {"backfillctl submit daily_revenue --partitions 2025-03-07 "
             "--reason \"late orders\" --priority 100 --max-parallel 2",
             "One partition, ahead of other jobs, two at a time"}}},
          {"status", {{"backfillctl status bf-42", "Job bf-42 in full"}}},
          {"list",
           {{"backfillctl list --state running,queued",
             "The jobs that run or wait"},
            {"backfillctl list --dataset daily_revenue --limit 10",
             "The last ten jobs that touch daily_revenue"},
            {"backfillctl --json list --all", "Every job, as JSON"}}},
          {"partitions",
           {{"backfillctl partitions bf-42 --state failed",
             "The partitions of bf-42 that failed"}}},
          {"freshness",
           {{"backfillctl freshness daily_revenue",
             "How current every published partition of daily_revenue is"},
            {"backfillctl freshness daily_revenue --only stale,due",
             "Only the stale partitions, due for a replay or not"},
            {"backfillctl --json freshness daily_revenue --only frozen",
             "The stale partitions the frozen rule closes, as JSON"}}},
          {"watch",
           {{"backfillctl watch bf-42", "Follow bf-42 until it ends"}}},
          {"cancel",
           {{"backfillctl cancel bf-42 --reason \"wrong range\"",
             "Cancel bf-42"}}},
          {"pause",
           {{"backfillctl pause bf-42 --reason \"warehouse maintenance\"",
             "Pause bf-42; it keeps its partitions"}}},
          {"resume",
           {{"backfillctl resume bf-42 --reason \"maintenance over\"",
             "Resume bf-42 from its checkpoints"}}},
          {"retry",
           {{"backfillctl retry bf-42 --reason \"source fixed\"",
             "Run the failed partitions of bf-42 again"}}},
          {"rollback",
           {{"backfillctl rollback bf-42 --reason \"published wrong "
             "numbers\"",
             "Restore what bf-42 replaced"},
            {"backfillctl rollback bf-42 --reason \"published wrong "
             "numbers\" --force",
             "The same, with the later jobs that republished its partitions"}}},
          {"approve",
           {{"backfillctl approve bf-42 --reason \"diff reviewed\"",
             "Publish bf-42, which awaits approval"},
            {"backfillctl approve bf-42 --reason \"known outlier\" "
             "--override",
             "Publish bf-42 although its checks failed"}}},
          {"diff",
           {{"backfillctl diff bf-42 --dataset daily_revenue --samples 5",
             "What bf-42 changes in daily_revenue, with five sample rows"}}},
          {"why",
           {{"backfillctl why daily_revenue 2025-03-07",
             "Every published version of that partition, and why"}}},
          {"audit",
           {{"backfillctl audit --since 2025-03-01 > audit.jsonl",
             "The audit log since March 1st, as JSON lines"},
            {"backfillctl audit --job bf-42", "The state changes of bf-42"}}},
          {"policies",
           {{"backfillctl policies",
             "Every replay policy: rules, paused or not, what is due, the "
             "last job"},
            {"backfillctl policies check daily_revenue",
             "What the policy of daily_revenue would submit now"},
            {"backfillctl policies check daily_revenue --submit",
             "Evaluate it now and submit what is due"},
            {"backfillctl policies pause daily_revenue --reason \"quarter "
             "close\"",
             "Submit nothing for it until resumed (kept across restarts)"},
            {"backfillctl policies resume daily_revenue",
             "Let it submit again; it is evaluated at once"}}},
          {"confirm",
           {{"backfillctl confirm bf-42",
             "Probe the consumers of bf-42 again and wait for the result"},
            {"backfillctl confirm bf-42 --no-wait",
             "Start the probes and return"}}},
          {"nodes",
           {{"backfillctl nodes",
             "The replicas of the group, their heartbeats and the job "
             "leases each holds"},
            {"backfillctl --json nodes", "The same as JSON"}}},
          {"health",
           {{"backfillctl health", "Exit 0 when the daemon is SERVING"},
            {"backfillctl --server localhost:50051 --tls-ca ca.crt "
             "--tls-cert probe.crt --tls-key probe.key health --answering",
             "Exit 0 when it answers at all, over mutual TLS (a liveness "
             "probe)"}}},
          {"completion",
           {{"backfillctl completion bash > "
             "/etc/bash_completion.d/backfillctl",
             "Install the bash completion"},
            {"backfillctl completion zsh > ~/.zfunc/_backfillctl",
             "Install the zsh completion (with ~/.zfunc in fpath)"}}},
      };
  return *examples;
}

// The footer of subcommand `name`'s --help: its examples, then the global
// flags.
std::string Footer(const std::string& name) {
  std::string footer;
  const std::vector<Example>& examples = ExamplesOf(name);
  if (!examples.empty()) {
    footer = "Examples:\n";
    for (const Example& example : examples) {
      absl::StrAppend(&footer, "  ", example.command, "\n      ", example.what,
                      "\n");
    }
    footer += "\n";
  }
  absl::StrAppend(
      &footer,
      "Global flags (before or after the subcommand): --server HOST:PORT "
      "(env BACKFILL_SERVER), --token TOKEN (env BACKFILL_TOKEN), --tls-ca "
      "FILE, --tls-cert FILE, --tls-key FILE (env BACKFILL_TLS_CA, "
      "BACKFILL_TLS_CERT, BACKFILL_TLS_KEY), --json, --timeout SECONDS.");
  return footer;
}

}  // namespace

std::string DefaultRequestedBy() {
  const char* user = std::getenv("USER");
  if (user != nullptr && *user != '\0') return user;
  if (const struct passwd* pw = getpwuid(getuid()); pw != nullptr) {
    return pw->pw_name;
  }
  return "unknown";
}

const std::vector<Example>& ExamplesOf(const std::string& name) {
  static const std::vector<Example>* const none = new std::vector<Example>();
  for (const auto& [command, examples] : AllExamples()) {
    if (command == name) return examples;
  }
  return *none;
}

std::string VersionText() {
  std::string text = absl::StrCat("backfillctl ", kBackfillVersion);
  if (kBackfillGitCommit[0] != '\0') {
    absl::StrAppend(&text, " (commit ", kBackfillGitCommit, ")");
  }
  absl::StrAppend(&text, " API ",
                  v1::Backfill::descriptor()->file()->package());
  return text;
}

std::unique_ptr<CommandLine> NewCommandLine() {
  auto line = std::make_unique<CommandLine>();
  CLI::App& app = line->app;
  // Must be set before adding subcommands, which inherit it.
  app.fallthrough();
  app.require_subcommand(1);

  GlobalOptions& globals = line->globals;
  app.add_option("--server", globals.server, "backfilld address HOST:PORT")
      ->envname("BACKFILL_SERVER")
      ->capture_default_str();
  app.add_option("--token", globals.token,
                 "Bearer token sent with every call, for a backfilld started "
                 "with --auth-tokens (prefer the environment variable: a "
                 "flag shows in the process list)")
      ->envname("BACKFILL_TOKEN");
  app.add_option("--tls-ca", globals.tls_ca_file,
                 "Connect with TLS, trusting the CA certificates of this PEM "
                 "file for the server's certificate")
      ->envname("BACKFILL_TLS_CA");
  app.add_option("--tls-cert", globals.tls_cert_file,
                 "Client certificate (PEM) for a backfilld that requires one "
                 "(--tls-client-ca); connects with TLS")
      ->envname("BACKFILL_TLS_CERT");
  app.add_option("--tls-key", globals.tls_key_file,
                 "Private key (PEM) of --tls-cert")
      ->envname("BACKFILL_TLS_KEY");
  app.add_flag("--json", globals.json,
               "Print the response as protobuf JSON (one document) on "
               "stdout");
  app.add_option("--timeout", globals.timeout_seconds,
                 "Deadline of each RPC, in seconds")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            double seconds = 0;
            if (!absl::SimpleAtod(text, &seconds) || !(seconds > 0)) {
              return "must be a positive number of seconds";
            }
            return "";
          },
          "SECONDS>0"))
      ->capture_default_str();

  CLI::App* datasets =
      app.add_subcommand("datasets", "List the declared datasets");

  ScopeOptions& scope = line->scope;
  CLI::App* plan = app.add_subcommand(
      "plan", "Show what a backfill would recompute and cost (writes nothing)");
  AddScopeOptions(plan, &scope);

  SubmitOptions& submit_options = line->submit_options;
  submit_options.requested_by = DefaultRequestedBy();
  CLI::App* submit =
      app.add_subcommand("submit", "Plan and enqueue a backfill");
  AddScopeOptions(submit, &scope);
  submit->add_option("--reason", submit_options.reason,
                     "Why the backfill runs (required; recorded in lineage)");
  submit->add_option("--ticket", submit_options.ticket,
                     "Ticket or incident reference");
  submit->add_option("--idempotency-key", submit_options.idempotency_key,
                     "Resubmitting with the same key returns the same job "
                     "(default: a random UUID, reused by the retries)");
  submit
      ->add_option("--requested-by", submit_options.requested_by,
                   "Who asks (default: $USER, else the login name)")
      ->capture_default_str();
  submit->add_flag("--wait", submit_options.wait,
                   "Follow the job; exit 0 only if it SUCCEEDED");
  submit->add_flag("--no-wait", submit_options.no_wait,
                   "Refuse (FAILED_PRECONDITION) instead of queueing behind "
                   "earlier jobs that hold some of the partitions");
  submit->add_option("--priority", submit_options.priority,
                     "-1000..1000 (default 0); free workers go to the "
                     "highest first");
  CLI::Option* max_parallel = submit->add_option(
      "--max-parallel", submit_options.max_parallel,
      "At most N partitions of this job at once (N >= 1; default: no limit "
      "of its own)");

  JobOptions& job = line->job;
  CLI::App* status = app.add_subcommand("status", "Show one backfill job");
  status->add_option("JOB", job.id, "Job id")->required();

  ListOptions& list_options = line->list_options;
  CLI::App* list =
      app.add_subcommand("list", "List backfill jobs, newest first");
  // Split by Cli::List() like --partitions: CLI11's delimiter would drop
  // empty items.
  list->add_option("--state", list_options.state_args,
                   "Only jobs in this state (repeatable or comma-separated; "
                   "RUNNING or BACKFILL_STATE_RUNNING)")
      ->allow_extra_args(false)
      ->expected(1, kMaxValuesPerFlag);
  list->add_option("--dataset", list_options.dataset,
                   "Only jobs whose plan touches this dataset");
  CLI::Option* list_limit =
      list->add_option("--limit", list_options.limit,
                       "At most this many jobs, newest first (default 50; "
                       "pages are followed as needed)")
          ->check(CLI::Validator(
              [](std::string& text) -> std::string {
                int limit = 0;
                if (!absl::SimpleAtoi(text, &limit) || limit < 0) {
                  return "must be a number of jobs, 1 or more (0: the "
                         "default, 50)";
                }
                return "";
              },
              "N>=0"));
  list->add_flag("--all", list_options.all,
                 "Every job that matches, page after page")
      ->excludes(list_limit);
  list->add_flag("--full", list_options.full,
                 "Ask for whole jobs, with every partition list of their "
                 "plans (see --json); default: without them");

  PartitionsOptions& partitions_options = line->partitions_options;
  CLI::App* partitions = app.add_subcommand(
      "partitions",
      "List the partitions of a job with their states, page after page");
  partitions->add_option("JOB", partitions_options.id, "Job id")->required();
  partitions->add_option("--dataset", partitions_options.dataset,
                         "Only this dataset of the job");
  // Split by Cli::Partitions() like list's --state.
  partitions
      ->add_option("--state", partitions_options.state_args,
                   "Only partitions in this state (repeatable or "
                   "comma-separated; FAILED or PARTITION_STATE_FAILED)")
      ->allow_extra_args(false)
      ->expected(1, kMaxValuesPerFlag);

  FreshnessOptions& freshness_options = line->freshness_options;
  CLI::App* freshness = app.add_subcommand(
      "freshness",
      "List the published partitions of a derived dataset and how current "
      "each is (current, stale, due for a replay, frozen), with the job "
      "that published it and the active job that holds it, page after page");
  freshness->add_option("DATASET", freshness_options.dataset, "Derived dataset")
      ->required();
  // Split by JobCommands::Freshness() like partitions' --state.
  freshness
      ->add_option("--only", freshness_options.only_args,
                   "Only partitions of this freshness (repeatable or "
                   "comma-separated; current, stale, due, frozen, any case, "
                   "or PARTITION_FRESHNESS_STALE)")
      ->allow_extra_args(false)
      ->expected(1, kMaxValuesPerFlag);

  CLI::App* watch = app.add_subcommand(
      "watch", "Follow a job until it ends; exit 0 only if it SUCCEEDED");
  watch->add_option("JOB", job.id, "Job id")->required();

  CLI::App* cancel = app.add_subcommand("cancel", "Cancel a backfill job");
  cancel->add_option("JOB", job.id, "Job id")->required();
  cancel->add_option("--reason", job.reason, "Why it is cancelled");

  CLI::App* pause = app.add_subcommand(
      "pause",
      "Pause a queued or running job (it keeps its partitions: overlapping "
      "jobs wait)");
  pause->add_option("JOB", job.id, "Job id")->required();
  pause->add_option("--reason", job.reason, "Why it is paused");

  CLI::App* resume =
      app.add_subcommand("resume", "Resume a paused job from its checkpoints");
  resume->add_option("JOB", job.id, "Job id")->required();
  resume->add_option("--reason", job.reason, "Why it is resumed");

  CLI::App* retry = app.add_subcommand(
      "retry",
      "Run a FAILED job again over its failed partitions, keeping the "
      "staged ones");
  retry->add_option("JOB", job.id, "Job id")->required();
  retry->add_option("--reason", job.reason, "Why it is retried");

  RollbackOptions& rollback_options = line->rollback_options;
  CLI::App* rollback = app.add_subcommand(
      "rollback",
      "Restore the rows a SUCCEEDED job replaced, in exactly its partitions "
      "(the job ends ROLLED_BACK)");
  rollback->add_option("JOB", job.id, "Job id")->required();
  rollback->add_option("--reason", rollback_options.reason,
                       "Why the job's data is withdrawn (required; recorded "
                       "in the job, the audit log and lineage)");
  rollback->add_option("--requested-by", rollback_options.requested_by,
                       "Who asks (default: your user name)");
  rollback->add_flag("--force", rollback_options.force,
                     "Also roll back the later jobs that published some of "
                     "its partitions since, to the state before JOB (only "
                     "when their partitions all lie within JOB's)");

  ApproveOptions& approve_options = line->approve_options;
  approve_options.approved_by = DefaultRequestedBy();
  CLI::App* approve = app.add_subcommand(
      "approve",
      "Publish a job AWAITING_APPROVAL (or, with --override, one that "
      "failed validation)");
  approve->add_option("JOB", approve_options.id, "Job id")->required();
  approve->add_option("--reason", approve_options.reason,
                      "Why publishing it is right (required; recorded in the "
                      "audit log and in lineage)");
  approve->add_flag("--override", approve_options.override_validation,
                    "Publish a VALIDATION_FAILED job despite its failed "
                    "checks");
  approve
      ->add_option("--approved-by", approve_options.approved_by,
                   "Who approves (default: $USER, else the login name)")
      ->capture_default_str();

  DiffOptions& diff_options = line->diff_options;
  CLI::App* diff = app.add_subcommand(
      "diff",
      "Show what a job changes: per partition rows before/after, added, "
      "removed, changed, measure deltas, sample rows");
  diff->add_option("JOB", diff_options.id, "Job id")->required();
  diff->add_option("--dataset", diff_options.dataset,
                   "Only this dataset of the job");
  diff->add_option("--samples", diff_options.samples,
                   "Sample rows per partition, 0..10")
      ->check(CLI::Range(0, 10))
      ->capture_default_str();

  WhyOptions& why_options = line->why_options;
  CLI::App* why = app.add_subcommand(
      "why",
      "Explain a partition: every published version, newest first (job, "
      "reason, who asked and approved, inputs, rows, diff), and whether it "
      "is stale");
  why->add_option("DATASET", why_options.dataset, "Dataset")->required();
  why->add_option("PARTITION", why_options.partition,
                  "Partition value (\"\" for an unpartitioned dataset)")
      ->required();

  AuditOptions& audit_options = line->audit_options;
  CLI::App* audit = app.add_subcommand(
      "audit",
      "Export the audit log (every job state change) as JSON lines, oldest "
      "first");
  audit->add_option("--since", audit_options.since,
                    "Only events at or after TIME (RFC 3339: YYYY-MM-DD, "
                    "YYYY-MM-DDTHH:MM:SS[.F]Z or ...+HH:MM)");
  audit->add_option("--job", audit_options.job, "Only events of this job");

  PolicyOptions& policy_options = line->policy_options;
  policy_options.requested_by = DefaultRequestedBy();
  CLI::App* policies = app.add_subcommand(
      "policies",
      "List the replay policies the pipelines declare (`replay:`); with "
      "ACTION: check (evaluate now and print what would be submitted; "
      "--submit to act), pause DATASET --reason R, resume DATASET");
  policies
      ->add_option("ACTION", policy_options.action,
                   "check, pause or resume (none: list the policies)")
      ->check(CLI::IsMember({"check", "pause", "resume"}));
  policies->add_option("DATASET", policy_options.dataset,
                       "The dataset whose policy (check: every policy when "
                       "left out)");
  policies->add_flag("--submit", policy_options.submit,
                     "check: submit the job of what is due");
  policies->add_option("--reason", policy_options.reason,
                       "pause: why (required; kept with the pause and in "
                       "the audit log); resume: why (optional, in the audit "
                       "log)");
  policies
      ->add_option("--requested-by", policy_options.requested_by,
                   "pause, resume: who (default: $USER, else the login "
                   "name; a server with authentication records the "
                   "principal)")
      ->capture_default_str();

  bool& confirm_no_wait = line->confirm_no_wait;
  CLI::App* confirm = app.add_subcommand(
      "confirm",
      "Invalidate and probe the downstream consumers of a SUCCEEDED or "
      "DOWNSTREAM_UNHEALTHY job again; waits for the result (exit code 0 "
      "only when it ends SUCCEEDED)");
  confirm->add_option("JOB", job.id, "Job id")->required();
  confirm->add_option("--reason", job.reason,
                      "Why the consumers are confirmed again (audit log)");
  confirm->add_flag("--no-wait", confirm_no_wait,
                    "Return as soon as the job is CONFIRMING");

  CLI::App* nodes = app.add_subcommand(
      "nodes",
      "List the replicas of the daemon's group (backfilld instances sharing "
      "one --state-dsn): address, version, last heartbeat, live, draining "
      "or missing, and the job leases each holds; a daemon alone on its "
      "state.db shows itself");

  HealthOptions& health_options = line->health_options;
  CLI::App* health = app.add_subcommand(
      "health",
      "Ask the daemon's gRPC health service (grpc.health.v1) whether it is "
      "SERVING; exit 0 if so, 1 if NOT_SERVING (its storage is failing) or "
      "unreachable. Needs no token");
  health->add_flag("--answering", health_options.answering,
                   "Exit 0 whenever the daemon answers, SERVING or "
                   "NOT_SERVING (a liveness probe: a daemon waiting for its "
                   "storage recovers by itself)");

  CompletionOptions& completion_options = line->completion_options;
  CLI::App* completion = app.add_subcommand(
      "completion",
      "Print the shell completion script of backfillctl for SHELL (bash or "
      "zsh) on stdout");
  completion->add_option("SHELL", completion_options.shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));

  app.set_version_flag("--version", VersionText(),
                       "Print the version, the commit it was built from and "
                       "the API package, and exit");

  for (CLI::App* command :
       {datasets,  plan,    submit, status,    list,   partitions,
        freshness, watch,   cancel, pause,     resume, retry,
        rollback,  approve, diff,   why,       audit,  policies,
        confirm,   nodes,   health, completion}) {
    command->footer(Footer(command->get_name()));
  }

  line->datasets = datasets;
  line->plan = plan;
  line->submit = submit;
  line->status = status;
  line->list = list;
  line->partitions = partitions;
  line->freshness = freshness;
  line->watch = watch;
  line->cancel = cancel;
  line->pause = pause;
  line->resume = resume;
  line->retry = retry;
  line->rollback = rollback;
  line->approve = approve;
  line->diff = diff;
  line->why = why;
  line->audit = audit;
  line->policies = policies;
  line->confirm = confirm;
  line->nodes = nodes;
  line->health = health;
  line->completion = completion;
  line->max_parallel = max_parallel;
  return line;
}

}  // namespace cli
}  // namespace backfill
