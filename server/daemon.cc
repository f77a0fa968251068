#include "server/daemon.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "core/base/clock.h"
#include "core/base/status_macros.h"
#include "core/base/thread_name.h"
#include "core/governance/warehouse_ownership.h"
#include "core/model/consumer_spec.h"
#include "core/model/pipeline_loader.h"
#include "core/plan/stale_partition_counts.h"
#include "core/plan/static_check.h"
#include "core/run/backfill_manager.h"
#include "core/run/fanout_observer.h"
#include "core/run/job_observer.h"
#include "core/run/lease_keeper.h"
#include "core/run/replay_keeper.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "platform/curl_http_client.h"
#include "platform/heap_trimmer.h"
#include "platform/posix_command_runner.h"
#include "platform/service_notifier.h"
#include "platform/systemd_notifier.h"
#include "server/backfill_api.h"
#include "server/backfill_service_impl.h"
#include "server/basic_auth_credentials.h"
#include "server/bearer_tokens.h"
#include "server/call_auth.h"
#include "server/daemon_options.h"
#include "server/data_dir_lock.h"
#include "server/grpc_metrics.h"
#include "server/http_api.h"
#include "server/listen_credentials.h"
#include "server/log_text.h"
#include "server/logging_observer.h"
#include "server/metrics.h"
#include "server/metrics_sources.h"
#include "server/node_leases_collector.h"
#include "server/openlineage_sender.h"
#include "server/reload_metrics.h"
#include "server/replay_policy_collector.h"
#include "server/stale_partitions_collector.h"
#include "server/storage_watch.h"
#include "server/warehouse_factory.h"
#include "spdlog/spdlog.h"
#include "storage/postgres/state/pg_lease_store.h"
#include "storage/postgres/state/pg_state_store.h"
#include "storage/sqlite/state/sqlite_state_store.h"

#ifndef BACKFILL_VERSION
#define BACKFILL_VERSION "0.0.0-dev"
#endif

namespace backfill {
namespace {

// Logs what CheckPipelineSql finds wrong with the pipelines' SQL against the
// warehouse. Not fatal, at start or at a reload: the warehouse may be loaded
// later, and plan and submit refuse the datasets concerned with the same
// messages.
void ReportPipelineSql(const Catalog& catalog, Engine* engine) {
  absl::StatusOr<std::vector<std::string>> problems =
      CheckPipelineSql(catalog, engine);
  if (!problems.ok()) {
    spdlog::warn("could not check the pipelines' SQL against the warehouse: {}",
                 LogText(problems.status().ToString()));
    return;
  }
  for (const std::string& problem : *problems) {
    spdlog::error("pipeline SQL: {}", LogText(problem));
  }
}

namespace fs = std::filesystem;

// How often the storage watch looks at the warehouse file (a stat and a
// read of its first 100 bytes); damage is reported after two looks.
constexpr absl::Duration kStorageWatchInterval = absl::Seconds(1);

// This machine's name ("localhost" when it has none).
std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
    return "localhost";
  }
  return name;
}

// "HOST:PORT" with the port replaced by `port`.
std::string WithPort(const std::string& address, int port) {
  const size_t colon = address.rfind(':');
  const std::string host =
      colon == std::string::npos ? address : address.substr(0, colon);
  return absl::StrCat(host, ":", port);
}

}  // namespace

const char* DaemonVersion() { return BACKFILL_VERSION; }

absl::StatusOr<Catalog> Daemon::LoadCatalog(const DaemonOptions& options) {
  std::string dir = options.pipelines_dir;
  if (dir.empty()) {
    std::error_code ec;
    const fs::path fallback = fs::path(options.data_dir) / "pipelines";
    if (!fs::is_directory(fallback, ec)) {
      spdlog::warn(
          "no --pipelines given and {} does not exist: starting with no "
          "datasets",
          fallback.string());
      return Catalog();
    }
    dir = fallback.string();
  }
  absl::StatusOr<Catalog> catalog = LoadPipelineDirectory(dir);
  if (!catalog.ok()) {
    return absl::Status(catalog.status().code(),
                        absl::StrCat("cannot load pipelines from ", dir, ": ",
                                     catalog.status().message()));
  }
  return catalog;
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(
    const DaemonOptions& options) {
  absl::StatusOr<Catalog> catalog = LoadCatalog(options);
  if (!catalog.ok()) return catalog.status();
  return Start(options, *std::move(catalog));
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(
    const DaemonOptions& options, Catalog catalog) {
  std::unique_ptr<Daemon> daemon(new Daemon(options));
  absl::Status status = daemon->Init(std::move(catalog));
  if (!status.ok()) {
    daemon->Shutdown();
    return status;
  }
  return daemon;
}

Daemon::Daemon(DaemonOptions options) : options_(std::move(options)) {
  notifier_ = options_.notifier;
  if (notifier_ == nullptr) {
    owned_notifier_ = std::make_unique<SystemdNotifier>();
    notifier_ = owned_notifier_.get();
  }
}

Daemon::~Daemon() { Shutdown(); }

absl::Status Daemon::Init(Catalog catalog) {
  // How long each step of the start took, logged once serving.
  absl::Time step_start = absl::Now();
  const absl::Time init_start = step_start;
  std::vector<std::string> steps;
  auto step_done = [&step_start, &steps](const char* what) {
    const absl::Time now = absl::Now();
    steps.push_back(absl::StrFormat("%s %.3f s", what,
                                    absl::ToDoubleSeconds(now - step_start)));
    step_start = now;
  };
  if (absl::Status s = CheckServingOptions(options_); !s.ok()) return s;
  const int workers =
      options_.workers > 0
          ? options_.workers
          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  const bool metrics_on = MetricsEnabled(options_);

  if (absl::Status s = CheckOpenLineageOptions(options_); !s.ok()) return s;
  if (absl::Status s = CheckSecurityOptions(options_); !s.ok()) return s;
  if (absl::Status s = CheckLimitOptions(options_); !s.ok()) return s;

  // 0. The data dir, locked: one daemon per state store and warehouse.
  std::error_code ec;
  fs::create_directories(options_.data_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create --data-dir ", options_.data_dir, ": ", ec.message()));
  }
  absl::StatusOr<std::unique_ptr<DataDirLock>> lock =
      DataDirLock::Acquire(options_.data_dir);
  if (!lock.ok()) return lock.status();
  lock_ = *std::move(lock);

  clock_ = std::make_unique<SystemClock>();

  // 1. Catalog.
  auto initial = std::make_shared<const Catalog>(std::move(catalog));
  catalog_ = std::make_unique<LiveCatalog>(initial);

  // 2. State store: state.db in the data dir, or PostgreSQL shared by the
  //    replicas of a group (--state-dsn), which needs a warehouse that
  //    every replica reaches: PostgreSQL too.
  std::string state_path;
  if (options_.state_dsn.empty()) {
    state_path = (fs::path(options_.data_dir) / "state.db").string();
    absl::StatusOr<std::unique_ptr<SqliteStateStore>> store =
        SqliteStateStore::Open(state_path);
    if (!store.ok()) {
      return absl::Status(store.status().code(),
                          absl::StrCat("cannot open state store ", state_path,
                                       ": ", store.status().message()));
    }
    store_ = *std::move(store);
  } else {
    if (absl::Status s = CheckReplicaOptions(options_); !s.ok()) return s;
    if (initial->warehouse().engine != "postgres") {
      return absl::FailedPreconditionError(absl::StrCat(
          "--state-dsn needs a PostgreSQL warehouse, but the pipelines' "
          "warehouse is ",
          initial->warehouse().engine,
          ": replicas on several machines share their state in PostgreSQL "
          "and must all reach the warehouse they publish into, which a "
          "SQLite file on one machine is not. Use a warehouse with engine: "
          "postgres, or drop --state-dsn to keep state.db in the data dir"));
    }
    state_path = StateStoreName(options_.state_dsn);
    // A replica frozen inside a transaction (its fencing check holds the
    // job's lease row) must not keep the others from taking its jobs over:
    // the server ends such a session after half a lease.
    const absl::Duration idle_in_transaction =
        std::max(absl::Seconds(1), absl::Seconds(options_.lease_seconds) / 2);
    absl::StatusOr<std::unique_ptr<PgStateStore>> store =
        PgStateStore::Open(options_.state_dsn, idle_in_transaction);
    if (!store.ok()) {
      return absl::Status(store.status().code(),
                          absl::StrCat("cannot open state store ", state_path,
                                       ": ", store.status().message()));
    }
    absl::StatusOr<std::unique_ptr<PgLeaseStore>> leases =
        PgLeaseStore::Open(options_.state_dsn, idle_in_transaction);
    if (!leases.ok()) {
      return absl::Status(
          leases.status().code(),
          absl::StrCat("cannot open the group's leases in ", state_path, ": ",
                       leases.status().message()));
    }
    lease_store_ = *std::move(leases);
    // The name and address are set once the port is bound (step 6).
    lease_keeper_ = std::make_unique<LeaseKeeper>(
        lease_store_.get(), NodeRecord{}, absl::Seconds(options_.lease_seconds),
        clock_.get());
    (*store)->SetFence(lease_keeper_.get());
    store_ = *std::move(store);
  }
  step_done("state store (integrity check, migrations)");

  // 3. Warehouse engine (warehouse_factory.h). A warehouse the state store
  //    has published into must exist: it is never silently created again.
  const WarehouseSpec& warehouse = initial->warehouse();
  absl::StatusOr<std::vector<std::string>> published =
      JobsWithPublications(store_.get());
  if (!published.ok()) {
    return absl::Status(published.status().code(),
                        absl::StrCat("cannot read state store ", state_path,
                                     ": ", published.status().message()));
  }
  WarehouseOpenOptions open_options;
  open_options.data_dir = options_.data_dir;
  open_options.connections = workers + 2;
  open_options.create_if_missing =
      published->empty() || options_.adopt_warehouse;
  open_options.stats_max_age = options_.stats_max_age;
  absl::StatusOr<OpenedWarehouse> opened =
      OpenWarehouse(warehouse, open_options);
  const std::string warehouse_path =
      opened.ok() ? opened->name : WarehouseName(warehouse, options_.data_dir);
  if (!opened.ok() && opened.status().code() == absl::StatusCode::kNotFound) {
    // The engine's message says what is there instead ("warehouse X does
    // not exist (...)", "... is an empty file (0 bytes) ...").
    return absl::FailedPreconditionError(absl::StrCat(
        opened.status().message(), ", but state store ", state_path,
        " records ", published->size(), " jobs published into it (the last ",
        published->back(),
        "): check --data-dir and the pipelines' warehouse path, or restore "
        "the warehouse. backfilld does not create an empty warehouse in its "
        "place; to start over with one, start once with --adopt-warehouse"));
  }
  if (!opened.ok()) {
    return absl::Status(opened.status().code(),
                        absl::StrCat("cannot open warehouse ", warehouse_path,
                                     ": ", opened.status().message()));
  }
  engine_ = std::move(opened->engine);
  // A replica's publishes and rollbacks are fenced in the warehouse too.
  if (lease_keeper_ != nullptr) engine_->SetFence(lease_keeper_.get());
  warehouse_lineage_location_ = opened->lineage_location;
  warehouse_lineage_name_prefix_ = opened->lineage_name_prefix;
  absl::StatusOr<OwnershipResult> ownership = CheckAndClaimWarehouse(
      store_.get(), engine_.get(), options_.adopt_warehouse, state_path,
      warehouse_path);
  if (!ownership.ok()) return ownership.status();
  if (!ownership->adopted.empty()) spdlog::warn("{}", ownership->adopted);

  // The pipelines' SQL against the warehouse: reported, not fatal (the
  // warehouse may be loaded after the daemon starts, and jobs of other
  // datasets and recovery must go on); plan and submit refuse the datasets
  // concerned with the same messages.
  ReportPipelineSql(*initial, engine_.get());
  step_done("warehouse (open, ownership, pipelines' SQL)");

  // 4. Metrics. Gauges read the store at scrape time.
  StateStore* store_ptr = store_.get();
  metrics_ = std::make_unique<Metrics>(
      [store_ptr] { return store_ptr->Stats(); }, DaemonVersion());
  reload_metrics_ = std::make_unique<ReloadMetrics>(metrics_->registry());
  reload_metrics_->Loaded(ReloadMetrics::Kind::kPipelines, absl::Now());
  // Stale partitions per dataset: first computed once the daemon serves
  // (step 7: it reads every recorded version, seconds over millions of
  // partitions), then again only when the recorded history changed
  // (core/plan/stale_partition_counts.h).
  stale_counts_ =
      std::make_unique<StalePartitionCounts>(catalog_.get(), store_.get());
  metrics_->AddCollectable(
      std::make_shared<StalePartitionsCollector>(stale_counts_.get()));
  ConfigureMetricsSources(*catalog_->Get(), store_.get(), metrics_.get());
  if (metrics_on) {
    Metrics::BasicAuthCheck basic_auth;
    if (!options_.metrics_basic_auth_file.empty()) {
      absl::StatusOr<BasicAuthCredentials> credentials =
          BasicAuthCredentials::Load(options_.metrics_basic_auth_file);
      if (!credentials.ok()) return credentials.status();
      {
        absl::MutexLock lock(&metrics_auth_mu_);
        metrics_auth_ = std::make_shared<const BasicAuthCredentials>(
            *std::move(credentials));
      }
      reload_metrics_->Loaded(ReloadMetrics::Kind::kMetricsAuth, absl::Now());
      basic_auth = [this](const std::string& user,
                          const std::string& password) {
        const std::shared_ptr<const BasicAuthCredentials> in_force =
            MetricsCredentials();
        return in_force != nullptr && in_force->Matches(user, password);
      };
      spdlog::info("/metrics requires HTTP basic auth (user {}, from {})",
                   LogText(MetricsCredentials()->username()),
                   options_.metrics_basic_auth_file);
    }
    if (absl::Status s =
            metrics_->Listen(options_.metrics_listen, std::move(basic_auth));
        !s.ok()) {
      return s;
    }
  } else {
    spdlog::info(
        "metrics disabled (--metrics-listen {})",
        options_.metrics_listen.empty() ? "\"\"" : options_.metrics_listen);
  }
  if (absl::Status s = StartOpenLineage(); !s.ok()) return s;
  heap_trimmer_ = std::make_unique<HeapTrimmer>();
  std::vector<JobObserver*> observers = {metrics_.get(), heap_trimmer_.get()};
  if (lineage_ != nullptr) observers.push_back(lineage_->observer());
  fanout_ = std::make_unique<FanoutObserver>(std::move(observers));
  observer_ = std::make_unique<LoggingObserver>(fanout_.get());

  step_done("metrics and OpenLineage");

  // 5. Manager (not started yet).
  ManagerOptions manager_options;
  manager_options.workers = workers;
  manager_options.max_queued_jobs = options_.max_queued_jobs;
  manager_options.max_queued_jobs_source = "backfilld --max-queued-jobs";
  manager_options.planner.max_partitions =
      static_cast<size_t>(options_.max_partitions_per_job);
  // Downstream consumers: HTTP through libcurl, commands without a shell.
  http_client_ = std::make_unique<CurlHttpClient>();
  command_runner_ = std::make_unique<PosixCommandRunner>();
  manager_options.http = http_client_.get();
  manager_options.commands = command_runner_.get();
  manager_options.leases = lease_keeper_.get();
  // A job's diff is set aside in the data dir, which has room for the
  // state, rather than in /tmp, which may be small or in memory.
  manager_options.scratch_dir = options_.data_dir;
  manager_ = std::make_unique<BackfillManager>(
      catalog_.get(), store_.get(), engine_.get(), clock_.get(),
      observer_.get(), manager_options);
  ReplayKeeper::Options replay;
  replay.start_paused = options_.no_replay;
  replay_ = std::make_unique<ReplayKeeper>(manager_.get(), engine_.get(),
                                           store_.get(), clock_.get(), replay);
  metrics_->AddCollectable(
      std::make_shared<ReplayPolicyCollector>(replay_.get()));

  // 6. gRPC server, bound before any job resumes: if the address is taken,
  //    nothing has run. Port sharing (SO_REUSEPORT) is off, so a second
  //    daemon on the same address fails here instead of splitting traffic.
  std::shared_ptr<const BearerTokens> tokens;
  if (!options_.auth_tokens_file.empty()) {
    absl::StatusOr<BearerTokens> loaded =
        BearerTokens::Load(options_.auth_tokens_file);
    if (!loaded.ok()) return loaded.status();
    tokens = std::make_shared<const BearerTokens>(*std::move(loaded));
    spdlog::info("authentication on: {} token(s) from {}", tokens->size(),
                 options_.auth_tokens_file);
    reload_metrics_->Loaded(ReloadMetrics::Kind::kTokens, absl::Now());
  }
  const bool authenticated = tokens != nullptr;
  auth_ = std::make_unique<CallAuth>(std::move(tokens), &metrics_->registry(),
                                     !options_.tls_client_ca_file.empty());
  ServiceLimits limits;
  limits.max_watch_streams_per_caller =
      options_.max_watch_streams_per_principal;
  api_ = std::make_unique<BackfillApi>(manager_.get(), absl::Seconds(1),
                                       kMaxListPageBytes, limits);
  api_->SetReplayKeeper(replay_.get());
  service_ = std::make_unique<BackfillServiceImpl>(api_.get(), auth_.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // gRPC refuses a larger request itself, before any handler sees it:
  // RESOURCE_EXHAUSTED "Received message larger than max (SIZE vs. LIMIT)".
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(options_.max_message_bytes));
  int port = 0;
  absl::StatusOr<ListenCredentials> credentials =
      LoadListenCredentials(options_.tls_cert_file, options_.tls_key_file,
                            options_.tls_client_ca_file);
  if (!credentials.ok()) return credentials.status();
  builder.AddListeningPort(options_.listen, credentials->credentials, &port);
  builder.RegisterService(service_.get());
  {
    std::vector<
        std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        interceptors;
    interceptors.push_back(metrics_->grpc()->NewInterceptorFactory());
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
  }
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on --listen ", options_.listen,
        " (address in use, not local, or malformed; use HOST:PORT)"));
  }
  // Said of the address bound: with port 0 in --listen, the port the
  // system chose.
  const std::string bound = WithPort(options_.listen, port);
  if (credentials->tls_note.has_value()) {
    spdlog::info("TLS on {}{}", bound, *credentials->tls_note);
  }
  if (!authenticated) {
    spdlog::warn(
        "authentication off (no --auth-tokens): whoever reaches {} may call "
        "every method",
        bound);
  }
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health != nullptr) SetHealthServing(health, false);

  step_done("gRPC server");

  if (!options_.http_listen.empty()) {
    HttpApiOptions http;
    http.listen = options_.http_listen;
    http.tls_cert_file = options_.tls_cert_file;
    http.tls_key_file = options_.tls_key_file;
    http.tls_client_ca_file = options_.tls_client_ca_file;
    http.max_body_bytes = options_.max_message_bytes;
    http.registry = &metrics_->registry();
    absl::StatusOr<std::unique_ptr<HttpApiServer>> started =
        HttpApiServer::Start(http, api_.get(), auth_.get());
    if (!started.ok()) return started.status();
    http_ = *std::move(started);
    spdlog::info("HTTP API on {}://{}/v1/, console on {}://{}/ui/",
                 http_->tls() ? "https" : "http",
                 WithPort(options_.http_listen, http_->port()),
                 http_->tls() ? "https" : "http",
                 WithPort(options_.http_listen, http_->port()));
    step_done("HTTP server");
  }

  // A replica of a group is named HOSTNAME:PORT unless --node-name says
  // otherwise, and reached at that address unless it listens on one host.
  NodeRecord self;
  self.address = bound;
  if (absl::StartsWith(bound, "0.0.0.0:") || absl::StartsWith(bound, "[::]:")) {
    self.address = absl::StrCat(HostName(), ":", port);
  }
  self.name = options_.node_name.empty() ? absl::StrCat(HostName(), ":", port)
                                         : options_.node_name;
  self.version = DaemonVersion();
  self.started_at = init_start;
  api_->SetGroup(lease_store_.get(), self,
                 absl::Seconds(options_.lease_seconds));
  if (lease_keeper_ != nullptr) {
    lease_keeper_->SetSelf(self);
    metrics_->AddCollectable(
        std::make_shared<NodeLeasesCollector>(lease_store_.get(), self.name));
    spdlog::info(
        "replica {} of the group in {} (leases of {} s): runs the jobs it "
        "claims",
        LogText(self.name), state_path, options_.lease_seconds);
  }

  // 7. Resume the jobs the store holds as unfinished (in a group: those it
  //    claims); then serving.
  if (absl::Status s = manager_->Start(); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("cannot start the manager: ", s.message()));
  }
  // The policies are looked at once jobs may run.
  replay_->StartLoop(absl::Seconds(1));
  if (health != nullptr) SetHealthServing(health, true);
  observer_->SetHealth(health);
  // What no write has met yet: the warehouse file removed, replaced or
  // truncated under the daemon.
  storage_watch_ = std::make_unique<StorageWatch>(
      std::vector<StorageWatch::Probe>{
          {"warehouse", [engine = engine_.get()] { return engine->Probe(); }}},
      [this](const std::string& /*name*/, const absl::Status& status) {
        observer_->SetStorageUsable(JobObserver::Storage::kWarehouse, status);
        metrics_->SetStorageUnusable(JobObserver::Storage::kWarehouse,
                                     !status.ok());
      },
      kStorageWatchInterval);
  storage_watch_->Start();
  listen_address_ = bound;
  step_done("resuming jobs");
  spdlog::info("started in {:.3f} s: {}",
               absl::ToDoubleSeconds(absl::Now() - init_start),
               absl::StrJoin(steps, ", "));
  // The stale-partition counts, off the path to serving: a scrape that
  // comes first waits for them (the counts' lock), requests do not.
  stale_counts_warmer_ = std::thread([counts = stale_counts_.get()] {
    NameThisThread("bf-stale-count");
    if (absl::Status s = counts->Get().status(); !s.ok()) {
      spdlog::warn("cannot count stale partitions: {}", LogText(s.ToString()));
    }
  });

  spdlog::info(
      "backfilld {} started: data dir {}, {} datasets, warehouse {}, {} "
      "workers, metrics {}",
      DaemonVersion(), options_.data_dir, initial->datasets().size(),
      warehouse_path, workers,
      metrics_on
          ? absl::StrCat("http://",
                         WithPort(options_.metrics_listen, metrics_->port()),
                         "/metrics")
          : std::string("disabled"));
  spdlog::info("backfilld listening on {}", listen_address_);
  notifier_->Ready(absl::StrCat(
      "serving gRPC on ", listen_address_, ", ", initial->datasets().size(),
      " datasets, metrics ",
      metrics_on ? WithPort(options_.metrics_listen, metrics_->port())
                 : std::string("disabled")));
  return absl::OkStatus();
}

absl::Status Daemon::CheckOpenLineageOptions(const DaemonOptions& options) {
  return backfill::CheckOpenLineageOptions(options);
}

absl::Status Daemon::CheckLimitOptions(const DaemonOptions& options) {
  return backfill::CheckLimitOptions(options);
}

absl::Status Daemon::CheckSecurityOptions(const DaemonOptions& options) {
  return backfill::CheckSecurityOptions(options);
}

absl::Status Daemon::StartOpenLineage() {
  if (options_.openlineage_url.empty()) {
    spdlog::info("OpenLineage disabled (no --openlineage-url)");
    return absl::OkStatus();
  }
  OpenLineageSenderOptions lineage_options;
  lineage_options.url = options_.openlineage_url;
  lineage_options.job_namespace = options_.openlineage_namespace;
  lineage_options.version = DaemonVersion();
  lineage_options.warehouse_location = warehouse_lineage_location_;
  lineage_options.warehouse_name_prefix = warehouse_lineage_name_prefix_;
  lineage_ = std::make_unique<OpenLineageSender>(std::move(lineage_options),
                                                 catalog_.get(), store_.get(),
                                                 metrics_->registry());
  return lineage_->Start();
}

void Daemon::StopOpenLineage() {
  if (lineage_ != nullptr) {
    spdlog::info("shutting down: sending the last OpenLineage events");
    lineage_->Shutdown();
  }
  // The observers are unused once the manager is gone.
  fanout_.reset();
  lineage_.reset();
}

absl::Status Daemon::Reload() {
  absl::MutexLock reload(&reload_mu_);
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (shut_down_ || manager_ == nullptr) {
      return absl::UnavailableError("not reloading: backfilld is stopping");
    }
  }
  spdlog::info(
      "SIGHUP: reloading the pipelines{}{}",
      options_.auth_tokens_file.empty() ? "" : ", the token file",
      MetricsCredentials() == nullptr ? "" : ", the /metrics basic auth file");
  absl::Status pipelines = ReloadPipelines();
  reload_metrics_->Reloaded(ReloadMetrics::Kind::kPipelines, pipelines.ok(),
                            absl::Now());
  absl::Status tokens = absl::OkStatus();
  if (!options_.auth_tokens_file.empty()) {
    tokens = ReloadTokens();
    reload_metrics_->Reloaded(ReloadMetrics::Kind::kTokens, tokens.ok(),
                              absl::Now());
  }
  absl::Status metrics_auth = absl::OkStatus();
  if (MetricsCredentials() != nullptr) {
    metrics_auth = ReloadMetricsAuth();
    reload_metrics_->Reloaded(ReloadMetrics::Kind::kMetricsAuth,
                              metrics_auth.ok(), absl::Now());
  }
  notifier_->Status(absl::StrCat(
      "serving gRPC on ", listen_address_, ", ",
      catalog_->Get()->datasets().size(), " datasets; last reload ",
      pipelines.ok() && tokens.ok() && metrics_auth.ok()
          ? "ok"
          : "failed (see the log)"));
  if (!pipelines.ok()) return pipelines;
  return tokens.ok() ? metrics_auth : tokens;
}

absl::Status Daemon::ReloadPipelines() {
  absl::StatusOr<Catalog> loaded = LoadCatalog(options_);
  if (!loaded.ok()) {
    spdlog::error(
        "reload of the pipelines refused, the {} datasets loaded before stay "
        "in force: {}",
        catalog_->Get()->datasets().size(),
        LogText(std::string(loaded.status().message())));
    return loaded.status();
  }
  const std::shared_ptr<const Catalog> current = catalog_->Get();
  const WarehouseSpec& was = current->warehouse();
  const WarehouseSpec& now = loaded->warehouse();
  if (was.engine != now.engine || was.path != now.path || was.dsn != now.dsn) {
    const absl::Status refused = absl::FailedPreconditionError(
        "the pipelines name another warehouse than the one backfilld "
        "opened at start (warehouse: engine, path or dsn changed); restart "
        "backfilld to switch warehouses");
    spdlog::error(
        "reload of the pipelines refused, the {} datasets loaded before stay "
        "in force: {}",
        current->datasets().size(), std::string(refused.message()));
    return refused;
  }
  auto next = std::make_shared<const Catalog>(*std::move(loaded));
  // As at start: SQL that does not work against the warehouse is reported,
  // not fatal; plan and submit refuse the datasets concerned.
  ReportPipelineSql(*next, engine_.get());
  const size_t before = current->datasets().size();
  const size_t after = next->datasets().size();
  catalog_->Replace(std::move(next));
  ConfigureMetricsSources(*catalog_->Get(), store_.get(), metrics_.get());
  spdlog::info(
      "pipelines reloaded: {} datasets (were {}); new calls use them, jobs "
      "already admitted keep the pipelines they were planned with",
      after, before);
  return absl::OkStatus();
}

absl::Status Daemon::ReloadTokens() {
  absl::StatusOr<BearerTokens> loaded =
      BearerTokens::Load(options_.auth_tokens_file);
  absl::Status status = loaded.status();
  if (status.ok() && loaded->has_certificate_principals() &&
      options_.tls_client_ca_file.empty()) {
    status = absl::InvalidArgumentError(
        absl::StrCat(options_.auth_tokens_file,
                     " has entries with client_certificate: true, but without "
                     "--tls-client-ca no client certificate is asked for"));
  }
  if (status.ok()) {
    const size_t count = loaded->size();
    status = auth_->ReplaceTokens(
        std::make_shared<const BearerTokens>(*std::move(loaded)));
    if (status.ok()) {
      spdlog::info("token file reloaded: {} token(s) from {}", count,
                   options_.auth_tokens_file);
      return status;
    }
  }
  spdlog::error(
      "reload of the token file refused, the tokens loaded before stay in "
      "force: {}",
      LogText(std::string(status.message())));
  return status;
}

absl::Status Daemon::ReloadMetricsAuth() {
  absl::StatusOr<BasicAuthCredentials> loaded =
      BasicAuthCredentials::Load(options_.metrics_basic_auth_file);
  if (!loaded.ok()) {
    spdlog::error(
        "reload of the /metrics basic auth file refused, the credentials "
        "loaded before stay in force: {}",
        LogText(std::string(loaded.status().message())));
    return loaded.status();
  }
  const std::string user = loaded->username();
  {
    absl::MutexLock lock(&metrics_auth_mu_);
    metrics_auth_ =
        std::make_shared<const BasicAuthCredentials>(*std::move(loaded));
  }
  spdlog::info("/metrics basic auth file reloaded: user {} from {}",
               LogText(user), options_.metrics_basic_auth_file);
  return absl::OkStatus();
}

std::shared_ptr<const BasicAuthCredentials> Daemon::MetricsCredentials() const {
  absl::MutexLock lock(&metrics_auth_mu_);
  return metrics_auth_;
}

int Daemon::metrics_port() const { return metrics_ ? metrics_->port() : 0; }

void Daemon::Wait() { done_.WaitForNotification(); }

void Daemon::Shutdown() {
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  // A reload in flight ends first; later ones see shut_down_.
  { absl::MutexLock reload(&reload_mu_); }
  // Only a daemon that told it was ready tells that it stops.
  if (!listen_address_.empty()) {
    notifier_->Stopping("draining: running partitions finish and checkpoint");
  }
  if (storage_watch_ != nullptr) storage_watch_->Stop();
  // No replay is submitted while the daemon drains.
  if (replay_ != nullptr) replay_->StopLoop();
  if (observer_ != nullptr) observer_->SetHealth(nullptr);
  if (server_ != nullptr) {
    spdlog::info("shutting down: stopping the gRPC server");
    // Submits are refused before health says NOT_SERVING, so that a client
    // that saw NOT_SERVING is never handed a new job.
    if (api_ != nullptr) api_->BeginShutdown();
    // Its watches end within a poll of the shutdown; its calls finish.
    http_.reset();
    if (grpc::HealthCheckServiceInterface* health =
            server_->GetHealthCheckService()) {
      health->Shutdown();  // NOT_SERVING from now on
    }
    server_->Shutdown(
        absl::ToChronoTime(absl::Now() + options_.shutdown_grace));
    server_->Wait();
  }
  if (manager_ != nullptr) {
    spdlog::info("shutting down: draining running partitions (at most {})",
                 absl::FormatDuration(options_.drain_timeout));
    // Partitions that outlive the drain timeout are interrupted; they run
    // again after a restart, from their checkpoints.
    absl::Notification drained;
    Engine* engine = engine_.get();
    std::thread watchdog([&drained, engine, this] {
      if (!drained.WaitForNotificationWithTimeout(options_.drain_timeout)) {
        spdlog::warn("drain timeout: interrupting running partitions");
        engine->Interrupt();
      }
    });
    manager_->Shutdown();
    drained.Notify();
    watchdog.join();
  }
  // Reads the store: done before the store goes.
  if (stale_counts_warmer_.joinable()) stale_counts_warmer_.join();
  http_.reset();
  server_.reset();
  service_.reset();
  api_.reset();
  manager_.reset();
  StopOpenLineage();
  heap_trimmer_.reset();
  clock_.reset();
  if (metrics_ != nullptr) metrics_->StopListening();
  // After the metrics stop: a scrape reads its records (its loop stopped
  // above, and it asks nothing of the manager then).
  replay_.reset();
  engine_.reset();
  store_.reset();
  lease_keeper_.reset();
  lease_store_.reset();
  observer_.reset();
  reload_metrics_.reset();
  metrics_.reset();
  stale_counts_.reset();
  catalog_.reset();
  lock_.reset();
  spdlog::info("backfilld stopped");
  done_.Notify();
}

}  // namespace backfill
