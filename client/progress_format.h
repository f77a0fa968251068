// progress_format: how backfillctl shows a job it follows (--wait, `watch`):
// a progress bar redrawn in place on a terminal, or one plain progress line
// per update otherwise.
//
// Pure functions from messages to text; thread-safe.

#ifndef BACKFILL_CLIENT_PROGRESS_FORMAT_H_
#define BACKFILL_CLIENT_PROGRESS_FORMAT_H_

#include <string>

#include "backfill/v1/backfill.pb.h"

namespace backfill {
namespace cli {

// `[#########.........]  45%  135/300 partitions  RUNNING  12.3 s`, then
// `  ETA 3m20s` when the ETA is known and `  cost 1.2k/3000 input_rows`
// (read so far / estimated) once there is a cost (no trailing newline, no
// carriage return).
std::string FormatProgressBar(const v1::Backfill& backfill,
                              double elapsed_seconds, int bar_width = 20);

// FormatProgressBar narrowed to fit a terminal of `columns` columns (fewer
// than `columns` characters, so that a redraw never wraps): the bar shrinks
// to 5 characters first, then the end of the line is cut.
std::string FormatProgressBarFitting(const v1::Backfill& backfill,
                                     double elapsed_seconds, int columns);

// `job bf-1: RUNNING  135/300 partitions  45%  12.3 s[  ETA 3m20s]
// [  cost 1.2k/3000 input_rows][  now: CURRENT STEP][  (message)]`
std::string FormatProgressLine(const v1::Backfill& backfill,
                               double elapsed_seconds);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_PROGRESS_FORMAT_H_
