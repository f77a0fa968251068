#include "server/daemon_main.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/run/crash_point.h"
#include "server/daemon.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace backfill {

int DaemonMain(int argc, char** argv, const DaemonMainHooks& hooks) {
  // Abseil as Debian builds it checks every lock acquisition of every
  // absl::Mutex (gRPC's own included) against a process-wide graph of lock
  // orders and aborts on a cycle: a cost on every lock, paid under a global
  // lock. The daemon runs without the check unless
  // BACKFILL_CHECK_LOCK_ORDER=1 asks for it, as the tests that start it do.
  {
    const char* check = std::getenv("BACKFILL_CHECK_LOCK_ORDER");
    if (check == nullptr || std::string(check) != "1") {
      absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    }
  }
  DaemonOptions options;
  std::string log_level = "info";

  CLI::App app{"backfilld: recomputes data partitions safely", "backfilld"};
  app.set_version_flag("--version",
                       std::string("backfilld ") + DaemonVersion());
  app.add_option("--data-dir", options.data_dir,
                 "Directory of the state store (state.db) and, by default, "
                 "the warehouse and pipelines")
      ->required();
  app.add_option("--pipelines", options.pipelines_dir,
                 "Directory of pipeline files (*.yaml); default "
                 "<data-dir>/pipelines when it exists");
  app.add_option("--listen", options.listen, "gRPC address HOST:PORT")
      ->capture_default_str();
  app.add_option("--metrics-listen", options.metrics_listen,
                 "Prometheus /metrics address HOST:PORT (\"none\" disables)")
      ->capture_default_str();
  app.add_option("--http-listen", options.http_listen,
                 "HTTP/JSON API (/v1/) and console (/ui/) address HOST:PORT; "
                 "off unless given. Same TLS, tokens and roles as --listen");
  app.add_option("--workers", options.workers,
                 "Partition worker threads (default: hardware concurrency)")
      ->check(CLI::Range(1, 1024));
  double drain_seconds = absl::ToDoubleSeconds(options.drain_timeout);
  app.add_option("--drain-timeout", drain_seconds,
                 "Seconds running partitions may take to finish on SIGTERM "
                 "before they are interrupted (they rerun after a restart)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  double stats_max_age_seconds = absl::ToDoubleSeconds(options.stats_max_age);
  app.add_option("--stats-max-age", stats_max_age_seconds,
                 "Seconds after which the warehouse's partition statistics "
                 "(the full-reload cost figure) are counted again in full; "
                 "0: on every plan")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 30.0 * 86400.0));
  app.add_flag("--adopt-warehouse", options.adopt_warehouse,
               "Let this state store take over a warehouse that belongs to "
               "another (or to no longer recorded jobs) as it is; see the "
               "README before using it");
  app.add_option(
      "--openlineage-url", options.openlineage_url,
      "Send OpenLineage RunEvents of every job to URL/api/v1/lineage, or "
      "to URL itself when it already ends in /api/v1/lineage (http:// or "
      "https://); default: none are sent");
  app.add_option("--openlineage-namespace", options.openlineage_namespace,
                 "OpenLineage namespace of backfilld's jobs")
      ->capture_default_str();
  app.add_option("--auth-tokens", options.auth_tokens_file,
                 "Token file: every call must carry \"authorization: Bearer "
                 "TOKEN\" with a token whose SHA-256 the file lists, and "
                 "the principal's roles must allow the method (see "
                 "docs/security.md); default: no authentication");
  app.add_option("--tls-cert", options.tls_cert_file,
                 "PEM certificate (chain) of the gRPC port: serve TLS");
  app.add_option("--tls-key", options.tls_key_file,
                 "PEM private key of --tls-cert (unencrypted)");
  app.add_option("--tls-client-ca", options.tls_client_ca_file,
                 "PEM CA bundle: require client certificates it signed "
                 "(mutual TLS); the certificate's Common Name is the "
                 "principal");
  app.add_option("--metrics-basic-auth", options.metrics_basic_auth_file,
                 "YAML file {username: NAME, sha256: <SHA-256 of the "
                 "password>}: /metrics requires HTTP basic auth with them "
                 "(see docs/security.md); default: none asked for");
  app.add_flag("--insecure", options.insecure,
               "Allow a --listen address other machines reach although the "
               "gRPC port is not encrypted or not authenticated, and a "
               "--metrics-listen address other machines reach without "
               "--metrics-basic-auth");
  app.add_flag("--no-replay", options.no_replay,
               "Start with every replay policy of the pipelines paused "
               "(nothing is replayed by itself until resumed)");
  app.add_option("--max-message-bytes", options.max_message_bytes,
                 "Largest request message the gRPC port receives; a larger "
                 "one is refused (RESOURCE_EXHAUSTED)")
      ->capture_default_str();
  app.add_option("--max-watch-streams-per-principal",
                 options.max_watch_streams_per_principal,
                 "Concurrent WatchBackfill streams per principal (per peer "
                 "host without --auth-tokens); one more is refused "
                 "(RESOURCE_EXHAUSTED)")
      ->capture_default_str();
  app.add_option("--max-queued-jobs", options.max_queued_jobs,
                 "QUEUED jobs beyond which a submit that would create a job "
                 "is refused (RESOURCE_EXHAUSTED, nothing created)")
      ->capture_default_str();
  app.add_option("--max-partitions-per-job", options.max_partitions_per_job,
                 "Partitions one backfill may plan, over all its datasets "
                 "(dependents included); a larger request is refused "
                 "(INVALID_ARGUMENT, PLAN_TOO_LARGE) and creates nothing")
      ->capture_default_str();
  app.add_option("--state-dsn", options.state_dsn,
                 "Keep the state store in PostgreSQL (libpq connection string "
                 "or URI; the password from PGPASSWORD, ~/.pgpass or "
                 "PGPASSFILE) instead of <data-dir>/state.db: replicas "
                 "started with the same one share the work (needs a "
                 "PostgreSQL warehouse; see docs/deploy.md)");
  app.add_option("--node-name", options.node_name,
                 "This replica's name in its group (default: HOSTNAME:PORT "
                 "of --listen)");
  app.add_option("--lease-seconds", options.lease_seconds,
                 "Seconds a replica's claim on a job outlives its last "
                 "renewal; another replica then takes the job over")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error")
      ->capture_default_str()
      ->check(CLI::IsMember(
          {"trace", "debug", "info", "warn", "error", "critical", "off"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, version or the error
    return code == 0 ? 0 : 2;
  }

  if (absl::Status s = Daemon::CheckOpenLineageOptions(options); !s.ok()) {
    std::cerr << "backfilld: " << s.message() << std::endl;
    return 2;
  }
  if (absl::Status s = Daemon::CheckSecurityOptions(options); !s.ok()) {
    std::cerr << "backfilld: " << s.message() << std::endl;
    return 2;
  }
  if (absl::Status s = Daemon::CheckLimitOptions(options); !s.ok()) {
    std::cerr << "backfilld: " << s.message() << std::endl;
    return 2;
  }
  if (absl::Status s = CheckReplicaOptions(options); !s.ok()) {
    std::cerr << "backfilld: " << s.message() << std::endl;
    return 2;
  }
  options.drain_timeout = absl::Seconds(drain_seconds);
  options.stats_max_age = absl::Seconds(stats_max_age_seconds);

  // Logs go to stderr; stdout stays free.
  spdlog::set_default_logger(spdlog::stderr_color_mt("backfilld"));
  spdlog::set_level(spdlog::level::from_str(log_level));

  // Block the shutdown and reload signals before any thread starts, so
  // that every thread inherits the mask and only sigwait() below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigset_t signals = stop_signals;
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (hooks.before_start) {
    if (absl::Status s = hooks.before_start(); !s.ok()) {
      std::cerr << "backfilld: " << s.message() << std::endl;
      return 1;
    }
  }
  // Crash points, armed by BACKFILL_TEST_CRASH_AT (inert without).
  if (absl::Status s = ArmCrashPointsFromEnvironment(); !s.ok()) {
    std::cerr << "backfilld: " << s.message() << std::endl;
    return 1;
  }

  absl::StatusOr<Catalog> catalog = Daemon::LoadCatalog(options);
  if (!catalog.ok()) {
    std::cerr << "backfilld: " << catalog.status().message() << std::endl;
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Daemon>> daemon =
      Daemon::Start(options, *std::move(catalog));
  if (!daemon.ok()) {
    std::cerr << "backfilld: " << daemon.status().message() << std::endl;
    return 1;
  }

  int signal = 0;
  while (sigwait(&signals, &signal) == 0 && signal == SIGHUP) {
    // Logged and counted by the daemon; the old configuration stays on
    // error.
    (*daemon)->Reload().IgnoreError();
  }
  spdlog::info("received {}, draining (send it again to exit at once)",
               signal == SIGTERM ? "SIGTERM" : "SIGINT");
  // Drain on another thread, so that a second signal can still end the
  // process at once (work in flight then reruns from its checkpoints).
  std::atomic<bool> drained{false};
  std::thread drain([&] {
    (*daemon)->Shutdown();
    drained = true;
  });
  const timespec poll = {0, 100 * 1000 * 1000};
  while (!drained) {
    // SIGHUP stays blocked (and pending) during the drain: no reload.
    if (sigtimedwait(&stop_signals, nullptr, &poll) > 0) {
      spdlog::warn("second signal: exiting without draining");
      spdlog::default_logger()->flush();
      std::_Exit(1);
    }
  }
  drain.join();
  spdlog::default_logger()->flush();
  return 0;
}

}  // namespace backfill
