// ReadProbe: how long a daemon takes to answer reads while a job runs —
// GetBackfill (BASIC) of the job, a page of ListBackfills (BASIC, 50 jobs)
// and the first update of a WatchBackfill of the job, one after the other
// in a loop on a thread of its own, each call's latency kept.
//
// Owns its thread: started by the constructor, stopped by Stop() or the
// destructor. Latencies() is read after Stop(); the client must outlive
// the probe (BackfillClient's calls may come from any thread).

#ifndef BACKFILL_BENCH_PERF_READ_PROBE_H_
#define BACKFILL_BENCH_PERF_READ_PROBE_H_

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "client/backfill_client.h"

namespace backfill::bench {

class ReadProbe {
 public:
  struct Latencies {
    std::vector<double> get;    // seconds per GetBackfill
    std::vector<double> list;   // per ListBackfills page
    std::vector<double> watch;  // to a watch's first update
    int errors = 0;
    std::string first_error;
  };

  ReadProbe(BackfillClient* client, std::string job_id);
  ~ReadProbe();

  ReadProbe(const ReadProbe&) = delete;
  ReadProbe& operator=(const ReadProbe&) = delete;

  void Stop();
  // After Stop().
  const Latencies& latencies() const { return latencies_; }
  // The largest of the three p99s, in seconds.
  double WorstP99() const;
  // "GetBackfill p50 0.6 ms, p99 3.7 ms (6803 calls); ListBackfills (50)
  // ...; WatchBackfill's first update ...", and the errors if any.
  std::string Figures() const;

 private:
  void Loop();

  BackfillClient* const client_;
  const std::string job_id_;
  std::atomic<bool> stop_{false};
  Latencies latencies_;
  std::thread thread_;
};

}  // namespace backfill::bench

#endif  // BACKFILL_BENCH_PERF_READ_PROBE_H_
