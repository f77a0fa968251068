// cli_format: the human and JSON renderings of backfill.v1 messages used by
// backfillctl, one include for all of them. Pure functions from messages to
// text; nothing here talks to the network or writes to a stream, so every
// format is unit-testable. Each unit says what it renders:
//
//   client/value_format.h     ToJson, TerminalText, timestamps, state
//                             names, numbers, counts, partition lists, costs
//   client/listing_format.h   FormatDatasets, FormatBackfills,
//                             FormatPartitions: the tables of lists
//   client/plan_format.h      FormatPlan, FormatPartitionReasons
//   client/job_format.h       FormatBackfill (with FormatChecks and
//                             FormatConfirmations): one job
//   client/diff_format.h      FormatDiff
//   client/progress_format.h  FormatProgress*: the --wait/watch progress
//                             bar and plain progress lines
//   client/policy_format.h    FormatReplayPolicies, FormatReplayPolicy,
//                             FormatReplayEvaluation
//   client/node_format.h      FormatNodes: the replicas of the group
//                             and their leases
//   client/freshness_format.h FormatDatasetPartitions: how current the
//                             published partitions of a dataset are
//
// Text that comes from the server or from users (a job's message, reason,
// ticket, requested_by, dataset names, partition values, ids) goes through
// TerminalText() in every human format, so that it cannot move the cursor,
// recolour or clear the terminal, or break a line. JSON is exact: the
// protobuf JSON printer escapes by itself. All timestamps are UTC
// ISO-8601, "-" when unset.
//
// Thread-safety: all functions are stateless and thread-safe.

#ifndef BACKFILL_CLIENT_CLI_FORMAT_H_
#define BACKFILL_CLIENT_CLI_FORMAT_H_

#include "client/diff_format.h"
#include "client/freshness_format.h"
#include "client/job_format.h"
#include "client/listing_format.h"
#include "client/node_format.h"
#include "client/plan_format.h"
#include "client/policy_format.h"
#include "client/progress_format.h"
#include "client/value_format.h"

#endif  // BACKFILL_CLIENT_CLI_FORMAT_H_
