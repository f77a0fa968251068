// BackfillClient: a typed client of backfill.v1.BackfillService for
// programs and for backfillctl. Turns gRPC statuses into absl::Status with
// the same canonical code and the server's message.
//
// Owns its channel and stub. Thread-safe: gRPC stubs may be used from many
// threads at once.

#ifndef BACKFILL_CLIENT_BACKFILL_CLIENT_H_
#define BACKFILL_CLIENT_BACKFILL_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace backfill {

class BackfillClient {
 public:
  // Connects (lazily) to `target`, "HOST:PORT", without TLS.
  static std::unique_ptr<BackfillClient> Connect(const std::string& target);
  explicit BackfillClient(std::shared_ptr<grpc::Channel> channel);

  // Waits until the channel is ready; UNAVAILABLE after `timeout`.
  absl::Status WaitForReady(absl::Duration timeout);

  // Every unary call gets `rpc_timeout` as its deadline.
  void set_rpc_timeout(absl::Duration timeout) { rpc_timeout_ = timeout; }

  absl::StatusOr<v1::PlanBackfillResponse> Plan(
      const v1::BackfillRequest& request);
  absl::StatusOr<v1::SubmitBackfillResponse> Submit(
      const v1::BackfillRequest& request, const std::string& idempotency_key);
  absl::StatusOr<v1::Backfill> Get(const std::string& id);
  absl::StatusOr<v1::ListBackfillsResponse> List(
      const v1::ListBackfillsRequest& request);
  absl::StatusOr<v1::Backfill> Cancel(const std::string& id,
                                      const std::string& reason);
  absl::StatusOr<v1::ListDatasetsResponse> ListDatasets();

  // Streams the job's updates to `on_update` until the server ends the
  // stream (the job finished) or `on_update` returns false. Returns the
  // stream's final status (OK when it ended normally or was stopped).
  absl::Status Watch(const std::string& id,
                     const std::function<bool(const v1::Backfill&)>& on_update);

 private:
  void SetDeadline(grpc::ClientContext* context) const;

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::BackfillService::Stub> stub_;
  absl::Duration rpc_timeout_ = absl::Seconds(30);
};

// Maps a grpc::Status to an absl::Status with the same code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace backfill

#endif  // BACKFILL_CLIENT_BACKFILL_CLIENT_H_
