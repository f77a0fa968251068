// node_convert: the answer of ListNodes (backfill.v1.ListNodesResponse)
// made from what the replicas of a group recorded in their LeaseStore
// (core/ports/lease_store.h), or from the one daemon that runs alone on its
// data dir's state.db.
//
// Every message built here has well-formed UTF-8 in its string fields
// (server/wire_text.h). Pure functions over values; they own nothing and
// keep no state, so they are thread-safe.

#ifndef BACKFILL_SERVER_NODE_CONVERT_H_
#define BACKFILL_SERVER_NODE_CONVERT_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "backfill/v1/backfill.pb.h"
#include "core/ports/lease_store.h"

namespace backfill {

// A group: every node of `nodes`, sorted by name, each with the leases of
// `leases` it holds (sorted by job id). A holder of leases that has no
// record of its own is listed with its name and leases only, not live; the
// node named `self` is marked so, and added from `self_record` (not live:
// it has no heartbeat on record) when the store has no record of it yet.
// A node is live when `now` - its last heartbeat <= `lease_time`.
v1::ListNodesResponse GroupNodesToProto(const std::vector<NodeRecord>& nodes,
                                        const std::vector<JobLease>& leases,
                                        const NodeRecord& self_record,
                                        absl::Time now,
                                        absl::Duration lease_time);

// A daemon alone: one node, itself (`self_record`), live, with no leases.
v1::ListNodesResponse AloneNodeToProto(const NodeRecord& self_record,
                                       absl::Time now);

}  // namespace backfill

#endif  // BACKFILL_SERVER_NODE_CONVERT_H_
