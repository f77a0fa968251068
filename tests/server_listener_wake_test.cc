// WakeListener and WakeHost: against a listening socket the test opens on
// loopback (the connection must reach its accept queue, which is what wakes
// a poll() on it), against a port nothing listens on, and the hosts a
// wildcard or bracketed listen address maps to.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "server/listener_wake.h"

namespace backfill {
namespace server_listener_wake_test {
namespace {

// A TCP socket bound to 127.0.0.1 on a free port; listening if asked.
class LoopbackSocket {
 public:
  explicit LoopbackSocket(bool listening) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    bound_ = fd_ >= 0 &&
             bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    socklen_t len = sizeof addr;
    if (bound_ &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
    if (listening && bound_) bound_ = listen(fd_, 8) == 0;
  }
  ~LoopbackSocket() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return bound_ && port_ > 0; }
  int fd() const { return fd_; }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  bool bound_ = false;
  int port_ = 0;
};

TEST(ListenerWakeTest, TheListenerGetsAConnectionAndItsPollReturns) {
  LoopbackSocket listener(/*listening=*/true);
  ASSERT_TRUE(listener.ok());
  EXPECT_TRUE(WakeListener("127.0.0.1", listener.port()));
  pollfd p{listener.fd(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10'000), 1) << "no connection reached the listener";
  const int conn = accept(listener.fd(), nullptr, nullptr);
  ASSERT_GE(conn, 0);
  // Nothing was sent: the first read sees the end of the connection.
  char byte;
  EXPECT_EQ(read(conn, &byte, 1), 0);
  close(conn);
}

TEST(ListenerWakeTest, NothingListeningIsReportedAndDoesNotHang) {
  int port;
  {
    LoopbackSocket bound(/*listening=*/false);
    ASSERT_TRUE(bound.ok());
    port = bound.port();
  }
  EXPECT_FALSE(WakeListener("127.0.0.1", port));
}

TEST(ListenerWakeTest, BadPortsAndHostsAreRefused) {
  EXPECT_FALSE(WakeListener("127.0.0.1", 0));
  EXPECT_FALSE(WakeListener("127.0.0.1", 70000));
  EXPECT_FALSE(WakeListener("no such host.invalid", 9090));
}

TEST(ListenerWakeTest, WildcardsMapToLoopbackOfTheirFamily) {
  EXPECT_EQ(WakeHost(":9464"), "127.0.0.1");
  EXPECT_EQ(WakeHost("0.0.0.0:9464"), "127.0.0.1");
  EXPECT_EQ(WakeHost("*:9464"), "127.0.0.1");
  EXPECT_EQ(WakeHost("[::]:9464"), "::1");
  EXPECT_EQ(WakeHost("[::1]:9464"), "::1");
  EXPECT_EQ(WakeHost("[fe80::1]:0"), "fe80::1");
  EXPECT_EQ(WakeHost("127.0.0.1:0"), "127.0.0.1");
  EXPECT_EQ(WakeHost("10.1.2.3:9464"), "10.1.2.3");
  EXPECT_EQ(WakeHost("metrics.example:9464"), "metrics.example");
}

}  // namespace
}  // namespace server_listener_wake_test
}  // namespace backfill
