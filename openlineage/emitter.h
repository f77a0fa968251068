// OpenLineageEmitter: sends the OpenLineage RunEvents of backfill jobs
// (openlineage/run_event.h) to a receiver, as a JobObserver.
//
// OnJobTransition only records the change in a bounded queue, under a
// mutex, and returns: no I/O, no store read, never a wait on the network,
// so a lineage outage cannot fail or slow a backfill. When the queue is
// full a change is dropped (its events are never built) and counted: the
// oldest change that ends no run (to RUNNING, or a re-confirmation) if
// there is one, else the new change if it ends no run, else the oldest; so
// the outcomes of jobs outlive their progress events.
//
// One delivery thread takes changes in order, reads the job, its tasks and
// its history (audit events) from the state store, builds the events and
// POSTs each as JSON to URL/api/v1/lineage. What a change sends depends on
// what the job's earlier changes sent (one START and at most one terminal
// event per run, see OutcomeOf), read from the history before the
// change's own audit event: the first event recording the same move after
// the last change of the job delivered, or, for a job not heard of since
// Start(), after the events recorded before Start().
//
// An attempt that gets no answer, or a 5xx, 408 or 429 answer, is retried
// with exponential backoff (initial_backoff doubling up to max_backoff)
// until it is accepted or Shutdown() runs out of drain time: a receiver
// that is down for minutes loses nothing while the queue has room, and
// delivery resumes in order when it is back. Any other 4xx is final (the
// receiver refuses the event; sending it again would not change that): the
// event is counted, dropped, and delivery goes on with the next.
//
// Shutdown() gives the thread drain_timeout (of the injected clock) to
// send what is queued, then drops the rest (counted) and joins: it returns
// after at most drain_timeout plus one request's timeout. Events are not
// kept across restarts; a job that was running when the daemon stopped
// gets its terminal events when it ends after the restart, with the same
// run ids.
//
// Events name the datasets as the catalog in force describes them (a
// LiveCatalog, core/model/live_catalog.h, may be replaced by a reload).
//
// The emitter does not own the catalog, store, HTTP client, clock or
// listener; they must outlive it. Thread-safe.

#ifndef BACKFILL_OPENLINEAGE_EMITTER_H_
#define BACKFILL_OPENLINEAGE_EMITTER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/base/clock.h"
#include "core/model/catalog.h"
#include "core/model/live_catalog.h"
#include "core/ports/http_client.h"
#include "core/ports/state_store.h"
#include "core/run/job_observer.h"
#include "openlineage/run_event.h"

namespace backfill::openlineage {

// Validates --openlineage-url (an http:// or https:// URL with a host, no
// query, fragment or credentials) and returns the endpoint events go to:
// URL/api/v1/lineage, or URL itself when its path already ends in
// /api/v1/lineage. INVALID_ARGUMENT naming the flag otherwise.
absl::StatusOr<std::string> LineageEndpoint(const std::string& url);

// The warehouse's OpenLineage dataset namespace: "sqlite://" followed by
// `host` (lower-cased; "localhost" when empty) and the warehouse file's
// `absolute_path`, e.g. "sqlite://db1.example/srv/backfill/warehouse.db".
std::string WarehouseNamespace(const std::string& host,
                               const std::string& absolute_path);

// The dataset name prefix of the PostgreSQL warehouse's tables, which live
// in `schema` of `database`: "{database}.{schema}.", so that a table is
// named "{database}.{schema}.{table}" in the namespace
// "postgres://{host}:{port}", as OpenLineage's naming spec asks.
std::string PostgresNamePrefix(const std::string& database,
                               const std::string& schema);

// Validates --openlineage-namespace: 1 to 256 printable ASCII characters
// without spaces. INVALID_ARGUMENT naming the flag otherwise.
absl::Status ValidateNamespace(const std::string& name_space);

struct EmitterOptions {
  std::string url;  // --openlineage-url (validated by LineageEndpoint)
  std::string job_namespace = "backfilld";
  std::string dataset_namespace;    // see EventConfig
  std::string dataset_name_prefix;  // see EventConfig
  std::string version;              // backfilld's version
  size_t queue_capacity = 1000;     // job state changes
  absl::Duration initial_backoff = absl::Milliseconds(500);
  absl::Duration max_backoff = absl::Seconds(30);
  absl::Duration connect_timeout = absl::Seconds(3);
  absl::Duration request_timeout = absl::Seconds(10);
  absl::Duration drain_timeout = absl::Seconds(5);
};

// Hears how delivery goes (metrics and logs). Called from the delivery
// thread only (and from Shutdown() once it has joined), never from the
// observer callback: must be thread-safe.
class DeliveryListener {
 public:
  virtual ~DeliveryListener() = default;
  // The receiver accepted an event (2xx).
  virtual void OnEventSent() {}
  // One attempt failed: no answer, or a non-2xx status.
  virtual void OnAttemptFailed(const std::string& why) {}
  // An event was given up: refused (4xx), or out of drain time at
  // shutdown.
  virtual void OnEventDropped(const std::string& why) {}
  // `count` more job state changes were dropped before their events were
  // built: the queue was full, the daemon stopped, or the job could not be
  // read. `summary` is a line to log, non-empty at most once a minute (of
  // the emitter's clock) and at shutdown, summing the drops since the
  // last one; `count` may then be 0.
  virtual void OnChangesDropped(int64_t count, const std::string& summary) {}
};

class OpenLineageEmitter final : public JobObserver {
 public:
  struct Counts {
    int64_t sent = 0;
    int64_t failed_attempts = 0;
    int64_t events_dropped = 0;
    int64_t changes_dropped = 0;
  };

  // `listener` may be null.
  OpenLineageEmitter(EmitterOptions options, const LiveCatalog* catalog,
                     StateStore* store, HttpClient* http, const Clock* clock,
                     DeliveryListener* listener);
  // The same with a catalog that never changes.
  OpenLineageEmitter(EmitterOptions options, const Catalog* catalog,
                     StateStore* store, HttpClient* http, const Clock* clock,
                     DeliveryListener* listener);
  ~OpenLineageEmitter() override;  // calls Shutdown()

  OpenLineageEmitter(const OpenLineageEmitter&) = delete;
  OpenLineageEmitter& operator=(const OpenLineageEmitter&) = delete;

  // Validates the options, reads the store's id and starts the delivery
  // thread. Changes heard before Start() wait in the queue.
  absl::Status Start();

  // Drains for at most drain_timeout, drops the rest, joins. Idempotent;
  // changes heard afterwards are dropped (counted).
  void Shutdown();

  // JobObserver: queues the changes that may send events (see
  // MaySendEvents).
  void OnJobTransition(const std::string& job_id, JobState from, JobState to,
                       const std::string& message) override;

  Counts counts() const;
  // Changes waiting in the queue.
  size_t queued() const;
  // Shutdown() has begun.
  bool stopping() const;

 private:
  struct Change {
    std::string job_id;
    JobState from;
    JobState to;
    std::string message;
    absl::Time at;
  };

  void Run();
  void Deliver(const Change& change);
  // The job's audit events before the one recording `change` (see the
  // header comment); delivery thread only.
  std::vector<AuditEvent> EventsBefore(const Change& change,
                                       const std::vector<AuditEvent>& history);
  // Sends one event, with retries.
  void Send(const std::string& json);
  // Sleeps `d` of the clock in slices, unless the drain deadline comes
  // first; false when it did (the caller gives up).
  bool Backoff(absl::Duration d);
  bool PastDrainDeadline() const;
  // Counts a change dropped on the delivery thread, and reports it.
  void DropChange(const std::string& why);
  // Tells the listener of the drops counted since the last call, and
  // gives it a summary to log once kDropLogInterval passed (or `flush`).
  // Delivery thread only (or Shutdown() after the join).
  void ReportDrops(bool flush);

  const EmitterOptions options_;
  const std::unique_ptr<LiveCatalog> owned_catalog_;  // fixed catalog only
  const LiveCatalog* const catalog_;
  StateStore* const store_;
  HttpClient* const http_;
  const Clock* const clock_;
  DeliveryListener* const listener_;
  std::string endpoint_;                          // set by Start()
  EventConfig config_;                            // set by Start()
  absl::Time started_at_ = absl::InfinitePast();  // set by Start()
  // Per job not yet in a final state: the audit seq of the last change
  // delivered. Delivery thread only.
  std::map<std::string, int64_t> cursors_;

  mutable absl::Mutex mu_;
  std::deque<Change> queue_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time drain_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  Counts counts_ ABSL_GUARDED_BY(mu_);
  // Drops counted but not yet told to the listener, and the last reason.
  int64_t unreported_drops_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_drop_why_ ABSL_GUARDED_BY(mu_);
  // Delivery thread only: what ReportDrops has not logged yet.
  std::string last_reported_why_ ABSL_GUARDED_BY(mu_);
  int64_t drops_since_log_ = 0;
  absl::Time last_drop_log_ = absl::InfinitePast();
  std::thread thread_;
};

}  // namespace backfill::openlineage

#endif  // BACKFILL_OPENLINEAGE_EMITTER_H_
