// Replay policy convert: the replay policies' API messages
// (backfill.v1.ReplayPolicy, ReplayEvaluation) made from what the
// ReplayKeeper (core/run/replay_keeper.h) reports. Pure functions;
// thread-safe.

#ifndef BACKFILL_SERVER_REPLAY_POLICY_CONVERT_H_
#define BACKFILL_SERVER_REPLAY_POLICY_CONVERT_H_

#include "backfill/v1/backfill.pb.h"
#include "core/model/catalog.h"
#include "core/run/replay_keeper.h"

namespace backfill {

v1::ReplayEvaluation ReplayEvaluationToProto(const ReplayEvaluation& ev,
                                             const Catalog& catalog);

v1::ReplayPolicy ReplayPolicyToProto(const ReplayPolicyStatus& status,
                                     const Catalog& catalog);

}  // namespace backfill

#endif  // BACKFILL_SERVER_REPLAY_POLICY_CONVERT_H_
