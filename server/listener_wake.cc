#include "server/listener_wake.h"

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

std::string WakeHost(const std::string& listen_address) {
  std::string host = listen_address.substr(0, listen_address.rfind(':'));
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
  bool established_any = false;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
               a->ai_protocol);
    if (fd < 0) continue;
    bool established = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    if (!established && errno == EINPROGRESS) {
      // Wait (briefly) for the connection to be established: then it is in
      // the listener's queue, which is what wakes its poll(). A refused one
      // polls writable too, with its error set.
      pollfd p{fd, POLLOUT, 0};
      int error = -1;
      socklen_t len = sizeof error;
      established =
          poll(&p, 1, kConnectWaitMs) > 0 && (p.revents & POLLOUT) != 0 &&
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0;
    }
    close(fd);
    established_any = established_any || established;
  }
  freeaddrinfo(found);
  return established_any;
}

}  // namespace backfill
