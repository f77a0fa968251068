// Daemon: the one composition root of backfilld. Start() builds, in order,
// the catalog, the state store, the warehouse engine, the metrics (and their
// HTTP exposer), the BackfillManager (which resumes unfinished jobs) and the
// gRPC server; Shutdown() tears them down in reverse order: the gRPC server
// first (open Watch streams end, in-flight calls get a short grace period),
// then the manager (running partitions finish and checkpoint), then the
// engine, the store and the metrics.
//
// Reload() (main() calls it on SIGHUP) loads the pipelines, the token file
// and the /metrics basic auth file again; each goes into force only when it
// loads and checks in full, else the one in force stays
// (core/model/live_catalog.h: jobs keep the catalog they were planned with).
//
// Its options and their checks are server/daemon_options.h.
//
// The Daemon owns everything it builds. Thread-safe: Wait(), Reload() and
// Shutdown() may be called from any thread; Shutdown() is idempotent.

#ifndef BACKFILL_SERVER_DAEMON_H_
#define BACKFILL_SERVER_DAEMON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "core/model/live_catalog.h"
#include "core/ports/command_runner.h"
#include "core/ports/http_client.h"
#include "server/daemon_options.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace backfill {

class BackfillManager;
class ReplayKeeper;
class BasicAuthCredentials;
class BackfillApi;
class BackfillServiceImpl;
class HttpApiServer;
class CallAuth;
class Engine;
class Metrics;
class StateStore;
class LeaseStore;
class LeaseKeeper;
class StalePartitionCounts;
class StorageWatch;
class SystemClock;
class JobObserver;
class DataDirLock;
class FanoutObserver;
class HeapTrimmer;
class HttpClient;
class LoggingObserver;
class OpenLineageSender;
class ReloadMetrics;
class ServiceNotifier;

// The backfilld version ("0.1.0").
const char* DaemonVersion();

class Daemon {
 public:
  // Loads the pipeline catalog the options name: --pipelines, else
  // <data_dir>/pipelines when it exists, else an empty catalog (with a
  // warning). Errors carry the loader's file, line and reason.
  static absl::StatusOr<Catalog> LoadCatalog(const DaemonOptions& options);

  // The checks of server/daemon_options.h (CheckOpenLineageOptions(),
  // CheckLimitOptions(), CheckSecurityOptions()), as DaemonMain calls them.
  static absl::Status CheckOpenLineageOptions(const DaemonOptions& options);
  static absl::Status CheckLimitOptions(const DaemonOptions& options);
  static absl::Status CheckSecurityOptions(const DaemonOptions& options);

  // Builds everything and starts serving. Errors name the step that failed.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(
      const DaemonOptions& options);
  // The same with a catalog loaded beforehand (see LoadCatalog()).
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(
      const DaemonOptions& options, Catalog catalog);

  ~Daemon();  // calls Shutdown()

  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // "HOST:PORT" the gRPC server listens on (the real port when 0 was asked).
  const std::string& listen_address() const { return listen_address_; }
  // The metrics port, 0 when disabled.
  int metrics_port() const;

  // Loads the pipelines (as LoadCatalog() does) and, with --auth-tokens and
  // --metrics-basic-auth, the token file and the basic auth file again, and
  // puts each in force for new calls when it loads and passes every start-up
  // check; jobs already admitted keep the catalog they were planned with. A
  // file that does not load (or a pipeline that names another warehouse)
  // changes nothing of its kind; the reason (the loader's file:line) is logged
  // and returned. Counted in backfill_config_reloads_total. OK when every kind
  // went in.
  absl::Status Reload();

  // Blocks until Shutdown() has finished.
  void Wait();

  // Drains and stops everything, in reverse order of Start(). Idempotent.
  void Shutdown();

 private:
  explicit Daemon(DaemonOptions options);
  absl::Status Init(Catalog catalog);
  // Builds and starts the OpenLineage emitter when --openlineage-url is
  // given.
  absl::Status StartOpenLineage();
  // Drains and destroys the emitter (after the manager stopped).
  void StopOpenLineage();
  // The two halves of Reload().
  absl::Status ReloadPipelines();
  absl::Status ReloadTokens();
  absl::Status ReloadMetricsAuth();
  // The /metrics credentials in force (null: none asked for).
  std::shared_ptr<const BasicAuthCredentials> MetricsCredentials() const;

  const DaemonOptions options_;
  std::string listen_address_;
  // options_.notifier, or owned_notifier_ (sd_notify) without one.
  std::unique_ptr<ServiceNotifier> owned_notifier_;
  ServiceNotifier* notifier_ = nullptr;

  // In construction order; destroyed in reverse by Shutdown().
  std::unique_ptr<DataDirLock> lock_;
  std::unique_ptr<LiveCatalog> catalog_;
  std::unique_ptr<StateStore> store_;
  // A replica of a group (--state-dsn): the group's leases in the state
  // store, and this replica's side of them; null for a single process.
  std::unique_ptr<LeaseStore> lease_store_;
  std::unique_ptr<LeaseKeeper> lease_keeper_;
  std::unique_ptr<Engine> engine_;
  // Where OpenLineage's dataset namespace says the warehouse is, and what
  // precedes its tables' names (OpenedWarehouse::lineage_location and
  // lineage_name_prefix).
  std::string warehouse_lineage_location_;
  std::string warehouse_lineage_name_prefix_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<ReloadMetrics> reload_metrics_;
  // OpenLineage (--openlineage-url), null without it.
  std::unique_ptr<OpenLineageSender> lineage_;
  // Returns the heap's free memory to the system as jobs change phase.
  std::unique_ptr<HeapTrimmer> heap_trimmer_;
  std::unique_ptr<StorageWatch> storage_watch_;
  // The observers after logging: metrics, the heap trimmer, then the
  // emitter (if any).
  std::unique_ptr<FanoutObserver> fanout_;
  // Stale partitions per dataset for the metrics (after store_, before
  // metrics_ is torn down it is no longer read).
  std::unique_ptr<StalePartitionCounts> stale_counts_;
  // Computes the stale-partition counts once the daemon serves; joined by
  // Shutdown().
  std::thread stale_counts_warmer_;
  std::unique_ptr<LoggingObserver> observer_;
  std::unique_ptr<SystemClock> clock_;
  // How confirmation reaches downstream consumers; outlive the manager.
  std::unique_ptr<HttpClient> http_client_;
  std::unique_ptr<CommandRunner> command_runner_;
  std::unique_ptr<BackfillManager> manager_;
  // Keeps the pipelines' replay policies (started after the manager,
  // stopped before it).
  std::unique_ptr<ReplayKeeper> replay_;
  // Who may call what; outlives the service.
  std::unique_ptr<CallAuth> auth_;
  // The calls of the API, which the gRPC service (and the HTTP server)
  // answer with; outlives them.
  std::unique_ptr<BackfillApi> api_;
  std::unique_ptr<BackfillServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  // --http-listen's server (null without it); stopped before the API.
  std::unique_ptr<HttpApiServer> http_;

  // --metrics-basic-auth's credentials, read by the exposer's threads on
  // every scrape and replaced by a reload.
  mutable absl::Mutex metrics_auth_mu_;
  std::shared_ptr<const BasicAuthCredentials> metrics_auth_
      ABSL_GUARDED_BY(metrics_auth_mu_);

  // Serializes reloads (SIGHUP) with each other and with Shutdown().
  absl::Mutex reload_mu_;
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
  absl::Notification done_;
};

}  // namespace backfill

#endif  // BACKFILL_SERVER_DAEMON_H_
