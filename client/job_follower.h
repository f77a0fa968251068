// JobFollower: follows a job until it is terminal or waits for an
// operator, as `submit --wait`, `watch` and `confirm` do — over the watch
// stream, else by polling GetBackfill (tolerating a server that restarts
// for a while) — drawing its progress on stderr (a bar redrawn in place on
// a terminal, plain lines otherwise), and turns the end into the printed
// job and the exit code. Ctrl-C while following says how to find the job
// again (it keeps running on the server).
//
// Borrows the client and the output, which must outlive it. Not
// thread-safe; installs a SIGINT handler while following.

#ifndef BACKFILL_CLIENT_JOB_FOLLOWER_H_
#define BACKFILL_CLIENT_JOB_FOLLOWER_H_

#include <string>

#include "absl/status/statusor.h"
#include "backfill/v1/backfill.pb.h"
#include "client/backfill_client.h"
#include "client/cli_output.h"

namespace backfill {
namespace cli {

class JobFollower {
 public:
  JobFollower(BackfillClient* client, const CliOutput* output)
      : client_(client), output_(output) {}

  // Follows job `id` (`latest`: what is already known of it, or an empty
  // message) until it is terminal or AWAITING_APPROVAL.
  absl::StatusOr<v1::Backfill> Follow(const std::string& id,
                                      v1::Backfill latest);
  // Prints the final job and maps its state to the exit code.
  int Finish(absl::StatusOr<v1::Backfill> final_job);

 private:
  BackfillClient* const client_;
  const CliOutput* const output_;
};

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_JOB_FOLLOWER_H_
