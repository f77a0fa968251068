// job_format: backfillctl's rendering of one job (`status`, and what the
// commands that act on a job print when they are done): a "label  value"
// block describing the job (its scope, budget, each dataset's estimated and
// actual cost, approval, diff totals, rollback), then why each partition is
// planned, its validation checks and its downstream consumers'
// confirmations.
//
// Pure functions from messages to text; thread-safe.

#ifndef BACKFILL_CLIENT_JOB_FORMAT_H_
#define BACKFILL_CLIENT_JOB_FORMAT_H_

#include <string>

#include "backfill/v1/backfill.pb.h"

namespace backfill {
namespace cli {

std::string FormatBackfill(const v1::Backfill& backfill);

// The "Checks" section of FormatBackfill ("" without results): counts of
// checks passed, failed, held and warned, then each failing result (at most
// 10 per severity) with what was allowed and up to 2 sample rows.
std::string FormatChecks(const v1::Backfill& backfill);

// The "Consumers" block of `status`: what the job's latest confirmation
// found per downstream consumer ("" before any).
std::string FormatConfirmations(const v1::Backfill& backfill);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_JOB_FORMAT_H_
