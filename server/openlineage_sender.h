// OpenLineageSender: the daemon's OpenLineage output (--openlineage-url):
// the emitter (openlineage/emitter.h), which sends the RunEvents of the
// jobs it hears of as a JobObserver, with what it needs: an HTTP client
// over libcurl, the system clock and its metrics
// (server/openlineage_metrics.h). It names the warehouse's datasets as
// OpenLineage's naming spec does: for SQLite, sqlite:// with this host's
// name and the file's absolute path; for PostgreSQL, postgres://HOST:PORT
// and tables named DATABASE.SCHEMA.TABLE.
//
// Owns the emitter, the HTTP client, the clock and the metrics; does not
// own the live catalog, the store or the registry, which must outlive it.
// Thread-safety: the observer may be called from any thread; call Start()
// once, before the manager starts, and Shutdown() after it stopped.

#ifndef BACKFILL_SERVER_OPENLINEAGE_SENDER_H_
#define BACKFILL_SERVER_OPENLINEAGE_SENDER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/model/live_catalog.h"
#include "core/ports/state_store.h"
#include "core/run/job_observer.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace backfill {

class HttpClient;
class OpenLineageMetrics;
class SystemClock;
namespace openlineage {
class OpenLineageEmitter;
}  // namespace openlineage

struct OpenLineageSenderOptions {
  std::string url;            // --openlineage-url, checked
  std::string job_namespace;  // --openlineage-namespace, checked
  std::string version;        // the producer's version, in every event
  // The warehouse as the engine factory describes it for lineage
  // (server/warehouse_factory.h OpenedWarehouse::lineage_location and
  // lineage_name_prefix).
  std::string warehouse_location;
  std::string warehouse_name_prefix;
};

class OpenLineageSender {
 public:
  OpenLineageSender(OpenLineageSenderOptions options,
                    const LiveCatalog* catalog, StateStore* store,
                    prometheus::Registry& registry);
  ~OpenLineageSender();  // the emitter's destructor calls its Shutdown()

  OpenLineageSender(const OpenLineageSender&) = delete;
  OpenLineageSender& operator=(const OpenLineageSender&) = delete;

  // Starts the emitter and logs where events go. Errors: "cannot start
  // OpenLineage: " and the emitter's reason.
  absl::Status Start();

  // Sends what is queued (for at most the emitter's drain timeout), then
  // stops. Idempotent.
  void Shutdown();

  // The emitter, to add to the manager's observers.
  JobObserver* observer() const;

 private:
  const OpenLineageSenderOptions options_;
  // The warehouse's dataset namespace, for the log.
  std::string dataset_namespace_;
  // In construction order; the emitter goes first.
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<SystemClock> clock_;
  std::unique_ptr<OpenLineageMetrics> metrics_;
  std::unique_ptr<openlineage::OpenLineageEmitter> emitter_;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_OPENLINEAGE_SENDER_H_
