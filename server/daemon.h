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

namespace grpc {
class Server;
}  // namespace grpc

namespace backfill {

class BackfillManager;
class BasicAuthCredentials;
class BackfillServiceImpl;
class CallAuth;
class Engine;
class Metrics;
class StateStore;
class StalePartitionCounts;
class StorageWatch;
class SystemClock;
class JobObserver;
class DataDirLock;
class FanoutObserver;
class HeapTrimmer;
class HttpClient;
class OpenLineageMetrics;
class ReloadMetrics;
class ServiceNotifier;
namespace openlineage {
class OpenLineageEmitter;
}  // namespace openlineage

struct DaemonOptions {
  std::string data_dir;       // required; created if missing
  std::string pipelines_dir;  // "": <data_dir>/pipelines if it exists
  std::string listen = "127.0.0.1:50051";
  std::string metrics_listen = "127.0.0.1:9464";  // "" or "none": disabled
  int workers = 0;  // 0: std::thread::hardware_concurrency()
  // How long in-flight calls may run on after Shutdown() begins.
  absl::Duration shutdown_grace = absl::Seconds(5);
  // How long running partitions may take to finish after Shutdown() begins;
  // then their statements are interrupted (they rerun after a restart).
  absl::Duration drain_timeout = absl::Seconds(30);
  // Partition statistics counted in full longer ago than this are counted
  // again (storage/sqlite/sqlite_partition_stats.h); zero: on every plan.
  absl::Duration stats_max_age = absl::Hours(1);
  // Let this state store take over the warehouse as it is, when the two do
  // not belong together (see core/governance/warehouse_ownership.h).
  bool adopt_warehouse = false;
  // --openlineage-url: where OpenLineage RunEvents are POSTed
  // (URL/api/v1/lineage, or URL when it ends in it); "": none are sent.
  // --openlineage-namespace: the OpenLineage namespace of the jobs.
  std::string openlineage_url;
  std::string openlineage_namespace = "backfilld";
  // --auth-tokens: the token file (server/bearer_tokens.h); "": every call is
  // admitted without credentials.
  std::string auth_tokens_file;
  // --tls-cert, --tls-key: PEM files of the gRPC port's TLS certificate
  // (chain) and key; both or neither ("": plaintext). --tls-client-ca: PEM
  // bundle of the CAs whose client certificates the port requires and
  // verifies ("": none asked for; needs --tls-cert).
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // --insecure: listen on an address other machines reach although the
  // calls are not encrypted or not authenticated (or, for
  // --metrics-listen, /metrics has no --metrics-basic-auth).
  bool insecure = false;
  // --metrics-basic-auth: the credentials file /metrics requires with HTTP
  // basic auth (server/basic_auth_credentials.h); "": none asked for.
  std::string metrics_basic_auth_file;
  // Limits, each refused with RESOURCE_EXHAUSTED naming it and its flag.
  // --max-message-bytes: the largest request message the gRPC server
  // receives (gRPC's own default, 4 MiB).
  int64_t max_message_bytes = 4 << 20;
  // --max-watch-streams-per-principal: concurrent WatchBackfill streams
  // per principal (per peer host without authentication).
  int64_t max_watch_streams_per_principal = 16;
  // --max-queued-jobs: QUEUED jobs beyond which a submit that would create
  // a job is refused.
  int64_t max_queued_jobs = 1000;
  // Told when the daemon is ready (it serves gRPC and /metrics) and when a
  // drain begins; not owned, must outlive the Daemon. nullptr: the
  // service manager over sd_notify (platform/systemd_notifier.h), which
  // does nothing without NOTIFY_SOCKET.
  ServiceNotifier* notifier = nullptr;
};

// Whether `listen` ("HOST:PORT" or "[IPV6]:PORT", as --listen takes it) can
// be reached only from this machine: a loopback address (127.0.0.0/8, ::1)
// or "localhost". Anything else (0.0.0.0, [::], a name or an interface's
// address) is reachable from other machines.
bool IsLocalOnlyAddress(const std::string& listen);

// The backfilld version ("0.1.0").
const char* DaemonVersion();

class Daemon {
 public:
  // Loads the pipeline catalog the options name: --pipelines, else
  // <data_dir>/pipelines when it exists, else an empty catalog (with a
  // warning). Errors carry the loader's file, line and reason.
  static absl::StatusOr<Catalog> LoadCatalog(const DaemonOptions& options);

  // Checks --openlineage-url and --openlineage-namespace (INVALID_ARGUMENT
  // naming the flag); OK when no URL is given.
  static absl::Status CheckOpenLineageOptions(const DaemonOptions& options);

  // Checks the limits (--max-message-bytes, --max-watch-streams-per-
  // principal, --max-queued-jobs) are in their ranges: INVALID_ARGUMENT
  // naming the flag, the value and the range.
  static absl::Status CheckLimitOptions(const DaemonOptions& options);

  // Checks --auth-tokens, --metrics-basic-auth and the TLS files (each
  // must load; --tls-cert and --tls-key go together; --tls-client-ca needs
  // them, and so does a token file entry with client_certificate: true;
  // --metrics-basic-auth needs /metrics on), and refuses a --listen address
  // other machines reach unless the port is both encrypted (TLS) and
  // authenticated (tokens or client certificates), and a --metrics-listen
  // address other machines reach without --metrics-basic-auth, unless
  // --insecure is given. INVALID_ARGUMENT naming the flags.
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
  class LoggingObserver;

  explicit Daemon(DaemonOptions options);
  absl::Status Init(Catalog catalog);
  // Builds and starts the OpenLineage emitter when --openlineage-url is
  // given.
  absl::Status StartOpenLineage();
  // Drains and destroys the emitter (after the manager stopped).
  void StopOpenLineage();
  // Declares the catalog's datasets to the metrics and where they read the
  // running jobs from.
  void ConfigureMetrics();
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
  std::unique_ptr<Engine> engine_;
  // Where OpenLineage's dataset namespace says the warehouse is, and what
  // precedes its tables' names (OpenedWarehouse::lineage_location and
  // lineage_name_prefix).
  std::string warehouse_lineage_location_;
  std::string warehouse_lineage_name_prefix_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<ReloadMetrics> reload_metrics_;
  // OpenLineage (--openlineage-url), all null without it.
  std::unique_ptr<HttpClient> lineage_http_;
  std::unique_ptr<SystemClock> lineage_clock_;
  std::unique_ptr<OpenLineageMetrics> lineage_metrics_;
  std::unique_ptr<openlineage::OpenLineageEmitter> lineage_;
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
  // Who may call what; outlives the service.
  std::unique_ptr<CallAuth> auth_;
  std::unique_ptr<BackfillServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;

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
