// BackfillClient: a typed client of backfill.v1.BackfillService for
// programs and for backfillctl. Turns gRPC statuses into absl::Status with
// the same canonical code and the server's message.
//
// Also the safe way to submit over an unreliable network: SubmitWithRetries
// sends one request, with one idempotency key, until it gets an answer that
// is not a transient failure, so that an attempt whose answer was lost
// never makes a second job. NewRandomUuid makes such a key.
//
// BackfillClient owns its channel and stub. Thread-safe: gRPC stubs may be
// used from many threads at once; set_rpc_timeout must not race with calls.
// The free functions keep no state and are thread-safe.

#ifndef BACKFILL_CLIENT_BACKFILL_CLIENT_H_
#define BACKFILL_CLIENT_BACKFILL_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.grpc.pb.h"
#include "client/rpc_error.h"
#include "grpcpp/grpcpp.h"

namespace backfill {

// A failed submit attempt that is about to be retried.
struct SubmitRetry {
  int attempt = 0;              // the attempt that failed, from 1
  int max_attempts = 0;         // attempts allowed in all
  absl::Status status;          // its error: UNAVAILABLE or DEADLINE_EXCEEDED
  absl::Duration backoff;       // the wait before the next attempt
  std::string idempotency_key;  // sent again, unchanged, with the request
};

// How SubmitWithRetries retries. The defaults wait 0.2, 0.4, 0.8 and 1.6 s
// between five attempts.
struct SubmitRetryOptions {
  int max_attempts = 5;  // values below 1 count as 1
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(3);  // the wait doubles up to it
  // Waits between attempts; absl::SleepFor when empty.
  std::function<void(absl::Duration)> sleep;
  // Told of each retry before its wait; may be empty.
  std::function<void(const SubmitRetry&)> on_retry;
};

// One SubmitBackfill call.
using SubmitFunction = std::function<absl::StatusOr<v1::SubmitBackfillResponse>(
    const v1::SubmitBackfillRequest&)>;

// True for the errors after which a submit may or may not have been carried
// out and an identical one may succeed: UNAVAILABLE and DEADLINE_EXCEEDED.
bool IsRetryableSubmitError(const absl::Status& status);

// Calls `submit` with `request` until it returns an answer or an error that
// is not retryable, at most `options.max_attempts` times, waiting between
// attempts. Every attempt sends the same request with the same idempotency
// key, so the server makes at most one job of them all (a later attempt
// gets the job an earlier one created, with `created` false). Returns the
// first answer or non-retryable error, else the last error. A request
// without an idempotency key is INVALID_ARGUMENT and nothing is sent: it
// would not be safe to repeat.
absl::StatusOr<v1::SubmitBackfillResponse> SubmitWithRetries(
    const v1::SubmitBackfillRequest& request, const SubmitRetryOptions& options,
    const SubmitFunction& submit);

// A random UUID, version 4 (RFC 9562): 32 lower-case hex digits grouped
// 8-4-4-4-12, "xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx" with V one of 8, 9, a,
// b. Its 122 random bits come from absl::BitGen, which is seeded from the
// operating system's entropy. The idempotency key backfillctl sends when it
// is given none.
std::string NewRandomUuid();

// How a client reaches a backfilld whose port serves TLS. PEM texts.
struct ChannelSecurity {
  bool tls = false;  // false: plaintext, and the fields below are unused
  std::string ca;    // roots that signed the server's certificate; "":
                     // the system's
  std::string cert;  // client certificate (chain) for mutual TLS; "": none
  std::string key;   // its private key
};

class BackfillClient {
 public:
  // Connects (lazily) to `target`, "HOST:PORT", with TLS when
  // `security.tls`.
  static std::unique_ptr<BackfillClient> Connect(
      const std::string& target, const ChannelSecurity& security = {});
  explicit BackfillClient(std::shared_ptr<grpc::Channel> channel);

  // Waits until the channel is ready; UNAVAILABLE after `timeout`.
  absl::Status WaitForReady(absl::Duration timeout);

  // Every unary call gets `rpc_timeout` as its deadline.
  void set_rpc_timeout(absl::Duration timeout) { rpc_timeout_ = timeout; }

  // Every call carries "authorization: Bearer <token>" ("": none).
  void set_token(std::string token) { token_ = std::move(token); }

  absl::StatusOr<v1::PlanBackfillResponse> Plan(
      const v1::BackfillRequest& request);
  // One SubmitBackfill call, not retried.
  absl::StatusOr<v1::SubmitBackfillResponse> Submit(
      const v1::SubmitBackfillRequest& request);
  absl::StatusOr<v1::SubmitBackfillResponse> Submit(
      const v1::BackfillRequest& request, const std::string& idempotency_key);
  // SubmitWithRetries() over this client's Submit; each attempt has its own
  // deadline.
  absl::StatusOr<v1::SubmitBackfillResponse> SubmitWithRetries(
      const v1::SubmitBackfillRequest& request,
      const SubmitRetryOptions& options);
  // The job in `view` (UNSPECIFIED: the server's default, FULL).
  absl::StatusOr<v1::Backfill> Get(
      const std::string& id,
      v1::BackfillView view = v1::BACKFILL_VIEW_UNSPECIFIED);
  // One page of jobs (ListBackfills).
  absl::StatusOr<v1::ListBackfillsResponse> List(
      const v1::ListBackfillsRequest& request);
  // One page of a job's partitions (ListPartitions).
  absl::StatusOr<v1::ListPartitionsResponse> ListPartitions(
      const v1::ListPartitionsRequest& request);
  absl::StatusOr<v1::ListDatasetsResponse> ListDatasets();
  // One page of a dataset's published partitions with how current each is
  // (ListDatasetPartitions).
  absl::StatusOr<v1::ListDatasetPartitionsResponse> ListDatasetPartitions(
      const v1::ListDatasetPartitionsRequest& request);
  // One declared dataset (GetDataset).
  absl::StatusOr<v1::Dataset> GetDataset(const std::string& name);

  // The operators' decisions on a job; each returns the job as it is
  // afterwards. `reason` is free text recorded with the change.
  absl::StatusOr<v1::Backfill> Cancel(const std::string& id,
                                      const std::string& reason);
  absl::StatusOr<v1::Backfill> Pause(const std::string& id,
                                     const std::string& reason);
  absl::StatusOr<v1::Backfill> Resume(const std::string& id,
                                      const std::string& reason);
  absl::StatusOr<v1::Backfill> Retry(const std::string& id,
                                     const std::string& reason);
  absl::StatusOr<v1::Backfill> Rollback(
      const v1::RollbackBackfillRequest& request);

  // Publishes a job held for approval (see ApproveBackfill).
  absl::StatusOr<v1::Backfill> Approve(
      const v1::ApproveBackfillRequest& request);
  // Confirms a published job's downstream consumers again
  // (ConfirmBackfill), saying why (optional); the job comes back
  // CONFIRMING.
  absl::StatusOr<v1::Backfill> Confirm(const std::string& id,
                                       const std::string& reason = "");
  // One page of a job's diff.
  absl::StatusOr<v1::DiffBackfillResponse> Diff(
      const v1::DiffBackfillRequest& request);
  // Every version of a partition (ExplainPartition).
  absl::StatusOr<v1::ExplainPartitionResponse> ExplainPartition(
      const std::string& dataset, const std::string& partition);
  // One page of the audit log.
  absl::StatusOr<v1::ListAuditEventsResponse> ListAuditEvents(
      const v1::ListAuditEventsRequest& request);

  // The replay policies (ListReplayPolicies); one evaluated now, and with
  // `submit` acted on (EvaluateReplayPolicy); one paused with a reason, or
  // resumed (PauseReplayPolicy, ResumeReplayPolicy; `requested_by` is the
  // name recorded when the server authenticates nobody).
  absl::StatusOr<v1::ListReplayPoliciesResponse> ListReplayPolicies();
  absl::StatusOr<v1::ReplayEvaluation> EvaluateReplayPolicy(
      const std::string& dataset, bool submit);
  absl::StatusOr<v1::ReplayPolicy> PauseReplayPolicy(
      const std::string& dataset, const std::string& reason,
      const std::string& requested_by);
  absl::StatusOr<v1::ReplayPolicy> ResumeReplayPolicy(
      const std::string& dataset, const std::string& requested_by,
      const std::string& reason = "");

  // The replicas of the daemon's group and the job leases they hold
  // (ListNodes).
  absl::StatusOr<v1::ListNodesResponse> ListNodes();

  // grpc.health.v1.Health/Check of `service` ("": the server as a whole;
  // backfilld answers for "" and for "backfill.v1.BackfillService"). True
  // when SERVING, false when NOT_SERVING; an error when the call fails
  // (e.g. UNAVAILABLE, or NOT_FOUND for a service the server does not
  // know). Sends no token: the health service needs none.
  absl::StatusOr<bool> CheckHealth(const std::string& service);

  // Streams the job's updates to `on_update` until the server ends the
  // stream (the job finished) or `on_update` returns false. Returns the
  // stream's final status (OK when it ended normally or was stopped).
  // `view`: that of the first update (UNSPECIFIED: the server's default,
  // BASIC); later updates are BASIC.
  absl::Status Watch(const std::string& id,
                     const std::function<bool(const v1::Backfill&)>& on_update,
                     v1::BackfillView view = v1::BACKFILL_VIEW_UNSPECIFIED);

 private:
  using Stub = v1::BackfillService::Stub;
  template <typename Request, typename Response>
  using UnaryMethod = grpc::Status (Stub::*)(grpc::ClientContext*,
                                             const Request&, Response*);

  // One unary call with the deadline of set_rpc_timeout().
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(UnaryMethod<Request, Response> method,
                                const Request& request);
  void SetDeadline(grpc::ClientContext* context) const;
  // Adds the bearer token, if any, to the call's metadata.
  void AddCredentials(grpc::ClientContext* context) const;

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Stub> stub_;
  absl::Duration rpc_timeout_ = absl::Seconds(30);
  std::string token_;
};

}  // namespace backfill

#endif  // BACKFILL_CLIENT_BACKFILL_CLIENT_H_
