#include "server/listener_wake.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace backfill {
namespace {

constexpr int kConnectWaitMs = 100;

}  // namespace

std::string WakeHost(const std::string& listen_host) {
  std::string host = listen_host;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || host == "0.0.0.0" || host == "*") return "127.0.0.1";
  if (host == "::") return "::1";
  return host;
}

bool WakeListener(const std::string& host, int port) {
  if (port <= 0 || port > 65535) return false;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0) {
    return false;
  }
  bool started = false;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
               a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      started = true;
    } else if (errno == EINPROGRESS) {
      // Until the listener has the connection in its queue, which is what
      // wakes its poll(); a listener that is gone answers at once.
      pollfd p{fd, POLLOUT, 0};
      // A refused connection polls writable too, with an error set.
      int error = -1;
      socklen_t len = sizeof error;
      started = poll(&p, 1, kConnectWaitMs) > 0 && (p.revents & POLLOUT) &&
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 &&
                error == 0;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return started;
}

}  // namespace backfill
