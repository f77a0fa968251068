// ServiceNotifier: how backfilld tells its service manager where it is in
// its life: ready (it serves gRPC and /metrics), a new status line, and
// stopping (a drain began). SystemdNotifier (systemd_notifier.h) sends
// these as sd_notify(3) messages; tests record them. Notifications are best
// effort: a failure to deliver one is logged by the implementation, never
// returned, and never stops the daemon. Implementations are thread-safe.

#ifndef BACKFILL_PLATFORM_SERVICE_NOTIFIER_H_
#define BACKFILL_PLATFORM_SERVICE_NOTIFIER_H_

#include <string>

namespace backfill {

class ServiceNotifier {
 public:
  virtual ~ServiceNotifier() = default;

  // Start-up finished: the service answers calls. `status` is a one-line
  // description for the service manager ("" for none).
  virtual void Ready(const std::string& status) = 0;
  // A one-line status while running (e.g. after a reload).
  virtual void Status(const std::string& status) = 0;
  // Shutdown began: no new work is taken, running work drains.
  virtual void Stopping(const std::string& status) = 0;
};

}  // namespace backfill

#endif  // BACKFILL_PLATFORM_SERVICE_NOTIFIER_H_
