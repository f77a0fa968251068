// End-to-end: the real backfilld under a stand-in for systemd's notify
// socket. The test binds a unix datagram socket, starts the daemon with
// NOTIFY_SOCKET naming it, and reads what the daemon tells: READY=1 (with a
// STATUS= line) once the gRPC port and /metrics answer, and STOPPING=1 when
// SIGTERM begins the drain.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/e2e_support.h"

namespace backfill {
namespace e2e_service_manager_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A bound AF_UNIX datagram socket: what systemd listens on for sd_notify.
class NotifySocket {
 public:
  explicit NotifySocket(std::string path) : path_(std::move(path)) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    bound_ = fd_ >= 0 && path_.size() < sizeof(addr.sun_path) &&
             bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }
  bool bound() const { return bound_; }
  const std::string& path() const { return path_; }

  // The next datagram, or nullopt when none came within `timeout`.
  std::optional<std::string> Receive(std::chrono::seconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count() * 1000)) != 1) {
      return std::nullopt;
    }
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n < 0) return std::nullopt;
    return std::string(buf, static_cast<size_t>(n));
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

std::vector<std::string> Lines(const std::string& message) {
  return absl::StrSplit(message, '\n', absl::SkipEmpty());
}

class ServiceManagerE2eTest : public E2eTest {};

TEST_F(ServiceManagerE2eTest, ReadyOnceServingAndStoppingWhenDraining) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/5, false));
  NotifySocket notify(root_ + "/notify.sock");
  ASSERT_TRUE(notify.bound()) << std::strerror(errno);
  Daemon& daemon = NewDaemon();
  daemon.set_env({"NOTIFY_SOCKET=" + notify.path()});
  ASSERT_TRUE(daemon.Spawn());

  std::optional<std::string> ready = notify.Receive(std::chrono::seconds(90));
  ASSERT_TRUE(ready.has_value()) << "no notification; log:\n"
                                 << ReadFile(daemon.log());
  const std::vector<std::string> lines = Lines(*ready);
  EXPECT_THAT(lines, Contains("READY=1")) << *ready;
  EXPECT_THAT(lines, Contains(StartsWith("STATUS=serving gRPC on "))) << *ready;
  // Ready means serving: both ports answer now, without waiting.
  RunResult datasets = daemon.Ctl({"datasets"}, std::chrono::seconds(30));
  EXPECT_EQ(datasets.exit_code, 0) << datasets;
  EXPECT_THAT(datasets.out, HasSubstr("daily_revenue"));
  const std::string scrape = HttpGet(daemon.metrics_port(), "/metrics");
  EXPECT_EQ(scrape.substr(0, 12).substr(9), "200") << scrape.substr(0, 100);

  daemon.Signal(SIGTERM);
  std::optional<std::string> stopping =
      notify.Receive(std::chrono::seconds(90));
  ASSERT_TRUE(stopping.has_value()) << ReadFile(daemon.log());
  EXPECT_THAT(Lines(*stopping), Contains("STOPPING=1")) << *stopping;
  EXPECT_THAT(Lines(*stopping), Not(Contains("READY=1")));
  std::optional<int> code = daemon.Wait(std::chrono::seconds(90));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
  // Nothing is sent after STOPPING=1.
  EXPECT_FALSE(notify.Receive(std::chrono::seconds(0)).has_value());
}

TEST_F(ServiceManagerE2eTest, WithoutNotifySocketNothingIsSent) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/5, false));
  Daemon& daemon = NewDaemon();
  daemon.set_env({"NOTIFY_SOCKET"});  // removed from the environment
  ASSERT_TRUE(daemon.Start());
  ASSERT_NO_FATAL_FAILURE(ExpectCleanSigterm(daemon));
  EXPECT_THAT(ReadFile(daemon.log()),
              Not(HasSubstr("cannot notify the service manager")));
}

}  // namespace
}  // namespace e2e_service_manager_test
}  // namespace backfill
