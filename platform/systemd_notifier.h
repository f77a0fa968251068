// SystemdNotifier: ServiceNotifier over libsystemd's sd_notify(3), for a
// unit with Type=notify: READY=1, STATUS=... and STOPPING=1 messages to the
// socket NOTIFY_SOCKET names. Without NOTIFY_SOCKET (not started by
// systemd) every call does nothing. Status lines are made single-line
// (control characters become spaces) before they are sent. Thread-safe
// (sd_notify opens its own socket per call).

#ifndef BACKFILL_PLATFORM_SYSTEMD_NOTIFIER_H_
#define BACKFILL_PLATFORM_SYSTEMD_NOTIFIER_H_

#include <string>

#include "platform/service_notifier.h"

namespace backfill {

class SystemdNotifier final : public ServiceNotifier {
 public:
  void Ready(const std::string& status) override;
  void Status(const std::string& status) override;
  void Stopping(const std::string& status) override;

  // The sd_notify message for `state` ("READY=1", "STOPPING=1" or "" for
  // none) and `status`: "READY=1\nSTATUS=serving on ...".
  static std::string Message(const std::string& state,
                             const std::string& status);

 private:
  void Send(const std::string& state, const std::string& status);
};

}  // namespace backfill

#endif  // BACKFILL_PLATFORM_SYSTEMD_NOTIFIER_H_
