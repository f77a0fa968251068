// SystemdNotifier against a unix datagram socket this test binds, standing
// in for systemd: the datagrams it reads are what sd_notify sent.
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "platform/systemd_notifier.h"

namespace backfill {
namespace platform_systemd_notifier_test {
namespace {

class SystemdNotifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/notify-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/notify.sock";
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd_, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(setenv("NOTIFY_SOCKET", path_.c_str(), 1), 0);
  }
  void TearDown() override {
    unsetenv("NOTIFY_SOCKET");
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }

  // The next datagram, if one is waiting (sd_notify has returned by then).
  std::optional<std::string> Pending() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 0) != 1) return std::nullopt;
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n < 0) return std::nullopt;
    return std::string(buf, static_cast<size_t>(n));
  }

  std::string dir_, path_;
  int fd_ = -1;
};

TEST_F(SystemdNotifierTest, SendsReadyStatusAndStopping) {
  SystemdNotifier notifier;
  notifier.Ready("serving on 127.0.0.1:1");
  EXPECT_EQ(Pending(), "READY=1\nSTATUS=serving on 127.0.0.1:1");
  notifier.Status("reloaded");
  EXPECT_EQ(Pending(), "STATUS=reloaded");
  notifier.Stopping("");
  EXPECT_EQ(Pending(), "STOPPING=1");
  EXPECT_EQ(Pending(), std::nullopt);
}

TEST_F(SystemdNotifierTest, StatusStaysOneLine) {
  SystemdNotifier notifier;
  // A newline would start another assignment, e.g. a forged READY=1.
  notifier.Status("a\nREADY=1\tb");
  EXPECT_EQ(Pending(), "STATUS=a READY=1 b");
}

TEST_F(SystemdNotifierTest, NothingWithoutNotifySocket) {
  unsetenv("NOTIFY_SOCKET");
  SystemdNotifier notifier;
  notifier.Ready("x");
  notifier.Stopping("y");
  EXPECT_EQ(Pending(), std::nullopt);
}

}  // namespace
}  // namespace platform_systemd_notifier_test
}  // namespace backfill
