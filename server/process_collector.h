// ProcessCollector: the standard process metrics of the Prometheus client
// libraries (prometheus-cpp has none), read from Linux's /proc at every
// scrape:
//   process_cpu_seconds_total      user + system CPU time (counter)
//   process_resident_memory_bytes  resident set size
//   process_virtual_memory_bytes   virtual memory size
//   process_open_fds               open file descriptors
//   process_max_fds                the soft limit on open file descriptors
//   process_start_time_seconds     start time, seconds since the epoch
// A value that cannot be read (no /proc) is left out of the scrape. No
// labels. Stateless: thread-safe.

#ifndef BACKFILL_SERVER_PROCESS_COLLECTOR_H_
#define BACKFILL_SERVER_PROCESS_COLLECTOR_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace backfill {

// The fields of /proc/<pid>/stat the collector uses, in clock ticks.
struct ProcStat {
  uint64_t utime_ticks = 0;
  uint64_t stime_ticks = 0;
  uint64_t start_ticks = 0;  // after boot
};

// Parses the text of /proc/<pid>/stat (the command name may hold spaces
// and parentheses). INVALID_ARGUMENT when it is not that format.
absl::StatusOr<ProcStat> ParseProcStat(absl::string_view text);

// Parses the text of /proc/<pid>/statm: {virtual pages, resident pages}.
absl::StatusOr<std::pair<uint64_t, uint64_t>> ParseProcStatm(
    absl::string_view text);

// The boot time, seconds since the epoch, from the text of /proc/stat.
absl::StatusOr<uint64_t> ParseBootTime(absl::string_view text);

class ProcessCollector final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_PROCESS_COLLECTOR_H_
