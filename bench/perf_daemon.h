// A backfilld process for the performance suite: started on a data
// directory, a free gRPC port and a free metrics port, ready once its health
// service answers SERVING; and jobs run through it over gRPC, each measured
// from submit to its end (wall time, and the daemon's CPU time over the
// same span).
//
// BenchDaemon owns its process and its client; destroying it kills a
// daemon still running. Not thread-safe, except client(), whose calls may
// come from many threads (as BackfillClient's).

#ifndef BACKFILL_BENCH_PERF_DAEMON_H_
#define BACKFILL_BENCH_PERF_DAEMON_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.pb.h"
#include "bench/perf_process.h"
#include "client/backfill_client.h"

namespace backfill::bench {

struct DaemonOptions {
  std::string binary;    // path of backfilld
  std::string data_dir;  // holds pipelines/ and the warehouse
  int workers = 2;
  std::vector<std::string> extra_args;
  std::string log_path;  // appended to; default <data_dir>/backfilld.log
};

// One job run through the daemon.
struct JobRun {
  double wall_seconds = 0;        // submit to the end of the job
  double daemon_cpu_seconds = 0;  // the daemon's CPU over the same span
  v1::Backfill job;               // as it ended (BASIC view)
};

// GET http://<address>/metrics (a daemon's metrics_address()), through
// the daemon's own HTTP client.
absl::StatusOr<std::string> ScrapeMetrics(const std::string& address);

// The values of family `name` by their `phase` label in the Prometheus text
// `text` (backfill_partition_phase_seconds_total: seconds per phase).
std::map<std::string, double> PhaseSamples(const std::string& text,
                                           const std::string& name);

class BenchDaemon {
 public:
  // Starts the daemon and waits (up to `timeout`) until it serves.
  static absl::StatusOr<std::unique_ptr<BenchDaemon>> Start(
      const DaemonOptions& options, absl::Duration timeout = absl::Minutes(2));
  ~BenchDaemon();

  // Start to the first SERVING answer of the health service.
  double seconds_to_serving() const { return seconds_to_serving_; }
  const std::string& target() const { return target_; }
  const std::string& metrics_address() const { return metrics_address_; }
  pid_t pid() const { return process_->pid(); }
  BackfillClient& client() { return *client_; }

  absl::StatusOr<ProcessSample> Sample() const { return process_->Sample(); }

  // Submits `request` and waits until the job ends; an error unless it
  // SUCCEEDED.
  absl::StatusOr<JobRun> RunJob(const v1::BackfillRequest& request);
  // Waits until job `id` ends; an error unless it SUCCEEDED.
  absl::StatusOr<v1::Backfill> WaitForJob(const std::string& id);

  // SIGTERM and wait (SIGKILL after a minute).
  int Stop();
  // SIGKILL: a crash.
  void Kill();

 private:
  BenchDaemon() = default;

  std::unique_ptr<ChildProcess> process_;
  std::unique_ptr<BackfillClient> client_;
  std::string target_;
  std::string metrics_address_;
  double seconds_to_serving_ = 0;
};

}  // namespace backfill::bench

#endif  // BACKFILL_BENCH_PERF_DAEMON_H_
