// JobCommands: backfillctl's commands about datasets and jobs — datasets,
// freshness, plan, submit, status, list, partitions, watch, cancel, pause,
// resume, retry, rollback, approve, diff, why, audit, confirm — and about the
// daemon itself — nodes and health — each one call (or a loop of pages) of
// BackfillClient, printed by the format units (client/cli_format.h) and
// answered through CliOutput.
//
// Owns its connection to the server. Not thread-safe: one command per
// process.

#ifndef BACKFILL_CLIENT_CLI_JOB_COMMANDS_H_
#define BACKFILL_CLIENT_CLI_JOB_COMMANDS_H_

#include <memory>
#include <string>

#include "backfill/v1/backfill.pb.h"
#include "client/backfill_client.h"
#include "client/cli_command_line.h"
#include "client/cli_output.h"
#include "client/job_follower.h"

namespace backfill {
namespace cli {

// The decisions on a job that `cancel`, `pause`, `resume` and `retry` send.
enum class JobAction { kCancel, kPause, kResume, kRetry };

// The request `plan` and `submit` send for the scope flags.
v1::BackfillRequest MakeRequest(const ScopeOptions& scope);

class JobCommands {
 public:
  explicit JobCommands(const GlobalOptions& globals);

  int Datasets();
  int Plan(const ScopeOptions& scope);
  int Submit(const ScopeOptions& scope, const SubmitOptions& options);
  int Status(const std::string& id);
  int List(const ListOptions& options);
  int Partitions(const PartitionsOptions& options);
  // The published partitions of a dataset and how current each is
  // (ListDatasetPartitions), every page.
  int Freshness(const FreshnessOptions& options);
  int Watch(const std::string& id);
  int Decide(JobAction action, const JobOptions& options);
  int Rollback(const std::string& id, const RollbackOptions& options);
  int Approve(const ApproveOptions& options);
  int Diff(const DiffOptions& options);
  int Why(const WhyOptions& options);
  int Audit(const AuditOptions& options);
  int Confirm(const std::string& id, const std::string& reason, bool wait);
  // The replicas of the daemon's group and their leases (ListNodes).
  int Nodes();
  // grpc.health.v1 of the BackfillService: 0 when SERVING (or, with
  // `answering`, whenever the server answers), 1 otherwise.
  int Health(bool answering);

 private:
  int RpcError(const absl::Status& status, absl::string_view more = "") const {
    return output_.RpcError(status, more);
  }
  int Print(const google::protobuf::Message& message,
            const std::string& human) const {
    return output_.Print(message, human);
  }

  CliOutput output_;
  std::unique_ptr<BackfillClient> client_;
  JobFollower follower_;
};

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_CLI_JOB_COMMANDS_H_
