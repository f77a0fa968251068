// node_format: the human rendering of `backfillctl nodes` (ListNodes): the
// replicas of the daemon's group and the job leases they hold.
//
//   FormatNodes  a line saying whether the daemon runs as a group (how
//                many replicas, how many live, draining, missing) or alone
//                on its data dir's state.db; a table NAME ADDRESS VERSION
//                HEARTBEAT STATE LEASES with the replica that answered
//                marked "(answering)"; then a table of the leases held,
//                JOB NODE STEP TOKEN EXPIRES, one line per lease.
//
// Ages and expiries are measured from the response's read_time (the clock
// of the replica that answered), never from this machine's clock, so the
// text depends on the response alone. Pure functions from messages to
// text, like the other format units (client/cli_format.h); text from the
// server goes through TerminalText().
//
// Thread-safety: stateless and thread-safe.

#ifndef BACKFILL_CLIENT_NODE_FORMAT_H_
#define BACKFILL_CLIENT_NODE_FORMAT_H_

#include <string>

#include "backfill/v1/backfill.pb.h"

namespace backfill {
namespace cli {

std::string FormatNodes(const v1::ListNodesResponse& response);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_NODE_FORMAT_H_
