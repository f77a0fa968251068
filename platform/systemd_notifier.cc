#include "platform/systemd_notifier.h"

#include <systemd/sd-daemon.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace backfill {

std::string SystemdNotifier::Message(const std::string& state,
                                     const std::string& status) {
  std::string line = status;
  for (char& c : line) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = ' ';
  }
  std::string message = state;
  if (!line.empty()) {
    absl::StrAppend(&message, message.empty() ? "" : "\n", "STATUS=", line);
  }
  return message;
}

void SystemdNotifier::Send(const std::string& state,
                           const std::string& status) {
  const std::string message = Message(state, status);
  if (message.empty()) return;
  // 0: NOTIFY_SOCKET is not set (nothing to tell); < 0: a delivery error.
  const int rc = sd_notify(/*unset_environment=*/0, message.c_str());
  if (rc < 0) {
    spdlog::warn("cannot notify the service manager ({}): {}",
                 state.empty() ? "STATUS" : state, std::strerror(-rc));
  }
}

void SystemdNotifier::Ready(const std::string& status) {
  Send("READY=1", status);
}

void SystemdNotifier::Status(const std::string& status) { Send("", status); }

void SystemdNotifier::Stopping(const std::string& status) {
  Send("STOPPING=1", status);
}

}  // namespace backfill
