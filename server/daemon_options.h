// DaemonOptions: backfilld's settings, one field per flag, and the checks
// of them that come before anything is opened: the addresses, the
// OpenLineage flags, the limits' ranges and the security flags (the files
// they name must load, and an address other machines reach must be
// encrypted and authenticated unless --insecure is given). Each check
// returns INVALID_ARGUMENT naming the flag. Daemon::Start() runs them all
// before it opens anything; DaemonMain runs some of them first, to refuse
// bad flags with their exit code (server/daemon_main.h).
//
// DaemonOptions is a value; it does not own its notifier. The checks keep
// no state (they only read the files the options name) and are
// thread-safe.

#ifndef BACKFILL_SERVER_DAEMON_OPTIONS_H_
#define BACKFILL_SERVER_DAEMON_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace backfill {

class ServiceNotifier;

struct DaemonOptions {
  std::string data_dir;       // required; created if missing
  std::string pipelines_dir;  // "": <data_dir>/pipelines if it exists
  std::string listen = "127.0.0.1:50051";
  std::string metrics_listen = "127.0.0.1:9464";  // "" or "none": disabled
  // --http-listen: the HTTP/JSON API and the console (HOST:PORT); "": off.
  std::string http_listen;
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
  // --state-dsn: keep the state store in PostgreSQL (a libpq connection
  // string or URI, without a password), shared by every replica started
  // with the same one; "": state.db in the data dir.
  std::string state_dsn;
  // --node-name: this replica's name in the group ("": HOSTNAME:PORT, the
  // port --listen bound).
  std::string node_name;
  // --lease-seconds: how long a replica's claim on a job outlives its last
  // renewal (renewed every third of it); another replica takes the job
  // over after that.
  int64_t lease_seconds = 10;
  // --no-replay: start with every replay policy paused.
  bool no_replay = false;
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
  // --max-partitions-per-job: partitions one backfill may plan, over all its
  // datasets (dependents included); a larger request is refused
  // (INVALID_ARGUMENT, PLAN_TOO_LARGE) and creates nothing.
  int64_t max_partitions_per_job = 1000000;
  // Told when the daemon is ready (it serves gRPC and /metrics) and when a
  // drain begins; not owned, must outlive the Daemon. nullptr: the
  // service manager over sd_notify (platform/systemd_notifier.h), which
  // does nothing without NOTIFY_SOCKET.
  ServiceNotifier* notifier = nullptr;
};

// Whether /metrics is on: --metrics-listen is neither "" nor "none".
bool MetricsEnabled(const DaemonOptions& options);

// Whether `listen` ("HOST:PORT" or "[IPV6]:PORT", as --listen takes it) can
// be reached only from this machine: a loopback address (127.0.0.0/8, ::1)
// or "localhost". Anything else (0.0.0.0, [::], a name or an interface's
// address) is reachable from other machines.
bool IsLocalOnlyAddress(const std::string& listen);

// Checks --data-dir is given and that --listen, --metrics-listen when
// /metrics is on and --http-listen when given are HOST:PORT (a bare port
// would listen on every interface), and that --http-listen is a port of
// its own.
absl::Status CheckServingOptions(const DaemonOptions& options);

// Checks --openlineage-url and --openlineage-namespace (INVALID_ARGUMENT
// naming the flag); OK when no URL is given.
absl::Status CheckOpenLineageOptions(const DaemonOptions& options);

// Checks the limits (--max-message-bytes, --max-watch-streams-per-
// principal, --max-queued-jobs) are in their ranges: INVALID_ARGUMENT
// naming the flag, the value and the range.
absl::Status CheckLimitOptions(const DaemonOptions& options);

// Checks --state-dsn (it parses and holds no password), --node-name (short,
// printable) and --lease-seconds (2 to 3600): INVALID_ARGUMENT naming the
// flag. Which warehouse the replicas need is checked once the pipelines
// are loaded (Daemon::Start).
absl::Status CheckReplicaOptions(const DaemonOptions& options);

// Checks --auth-tokens, --metrics-basic-auth and the TLS files (each
// must load; --tls-cert and --tls-key go together; --tls-client-ca needs
// them, and so does a token file entry with client_certificate: true;
// --metrics-basic-auth needs /metrics on), and refuses a --listen address
// other machines reach unless the port is both encrypted (TLS) and
// authenticated (tokens or client certificates), and a --metrics-listen
// address other machines reach without --metrics-basic-auth, unless
// --insecure is given. --http-listen follows --listen's rule: it serves the
// same calls with the same TLS files and tokens. INVALID_ARGUMENT naming the
// flags.
absl::Status CheckSecurityOptions(const DaemonOptions& options);

}  // namespace backfill

#endif  // BACKFILL_SERVER_DAEMON_OPTIONS_H_
