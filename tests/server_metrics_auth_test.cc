// /metrics with --metrics-basic-auth on a real Daemon: a scrape without
// credentials or with a wrong password is answered 401, the right user and
// password 200 with the exposition; a reload puts a new password in force
// and a bad file keeps the old one. And the start-up checks: a
// --metrics-listen address other machines reach needs --metrics-basic-auth
// or --insecure, and the file must load. The password digests are
// sha256sum's output, computed outside the code under test.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/model/catalog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/curl_http_client.h"
#include "server/daemon.h"

namespace backfill {
namespace server_metrics_auth_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kPassword[] = "correct horse battery staple";
// printf %s 'correct horse battery staple' | sha256sum
constexpr char kDigest[] =
    "c4bbcb1fbec99d65bf59d85c8cb62ee2db963f0fe106f483d9afa73bd4e39a8a";
constexpr char kNewPassword[] = "prometheus";
// printf %s prometheus | sha256sum
constexpr char kNewDigest[] =
    "1809f7cd0c75acf34f56d8c19782b99c6b5fcd14128a3cc79aca38a4f94af3ff";

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

class MetricsAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        (fs::temp_directory_path() / "backfill-metrics-auth-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auth_file_ = dir_ + "/metrics-auth.yaml";
    Write(auth_file_,
          absl::StrCat("username: prometheus\nsha256: ", kDigest, "\n"));
  }
  void TearDown() override {
    if (daemon_ != nullptr) daemon_->Shutdown();
    daemon_.reset();
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  DaemonOptions Options() const {
    DaemonOptions options;
    options.data_dir = dir_ + "/data";
    options.listen = "127.0.0.1:0";
    options.metrics_listen = "127.0.0.1:0";
    options.metrics_basic_auth_file = auth_file_;
    options.workers = 1;
    return options;
  }

  // GET /metrics, with "Authorization: Basic base64(user:password)" when
  // `user` is given.
  HttpResponse Scrape(const char* user = nullptr,
                      const std::string& password = "") {
    HttpRequest request;
    request.url =
        absl::StrCat("http://127.0.0.1:", daemon_->metrics_port(), "/metrics");
    if (user != nullptr) {
      request.headers.emplace_back(
          "Authorization",
          "Basic " + absl::Base64Escape(absl::StrCat(user, ":", password)));
    }
    absl::StatusOr<HttpResponse> response = http_.Send(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : HttpResponse{};
  }

  std::string dir_;
  std::string auth_file_;
  std::unique_ptr<Daemon> daemon_;
  CurlHttpClient http_;
};

TEST_F(MetricsAuthTest, OnlyTheRightPasswordScrapes) {
  absl::StatusOr<std::unique_ptr<Daemon>> daemon =
      Daemon::Start(Options(), Catalog());
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  daemon_ = *std::move(daemon);
  ASSERT_GT(daemon_->metrics_port(), 0);

  HttpResponse none = Scrape();
  EXPECT_EQ(none.status, 401);
  EXPECT_THAT(none.body, Not(HasSubstr("backfill_")));
  HttpResponse wrong = Scrape("prometheus", "correct horse");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(Scrape("grafana", kPassword).status, 401);
  HttpResponse right = Scrape("prometheus", kPassword);
  EXPECT_EQ(right.status, 200);
  EXPECT_THAT(right.body, HasSubstr("backfill_build_info"));

  // A reload puts the new password in force; the old one is refused.
  Write(auth_file_,
        absl::StrCat("username: prometheus\nsha256: ", kNewDigest, "\n"));
  EXPECT_TRUE(daemon_->Reload().ok());
  EXPECT_EQ(Scrape("prometheus", kPassword).status, 401);
  EXPECT_EQ(Scrape("prometheus", kNewPassword).status, 200);

  // A file that does not load changes nothing.
  Write(auth_file_, "username: prometheus\nsha256: abc\n");
  absl::Status refused = daemon_->Reload();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr(auth_file_ + ":2: sha256 must be 64 hex digits"));
  EXPECT_EQ(Scrape("prometheus", kNewPassword).status, 200);
  HttpResponse counted = Scrape("prometheus", kNewPassword);
  EXPECT_THAT(counted.body,
              HasSubstr("backfill_config_reloads_total{kind=\"metrics_auth\","
                        "result=\"error\"} 1"));
  EXPECT_THAT(counted.body,
              HasSubstr("backfill_config_reloads_total{kind=\"metrics_auth\","
                        "result=\"ok\"} 1"));
}

TEST_F(MetricsAuthTest, AnExposedMetricsPortNeedsBasicAuthOrInsecure) {
  DaemonOptions exposed = Options();
  exposed.metrics_listen = "0.0.0.0:9464";
  exposed.metrics_basic_auth_file.clear();
  absl::Status s = Daemon::CheckSecurityOptions(exposed);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("--metrics-listen 0.0.0.0:9464 can be reached from "
                        "other machines"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--metrics-basic-auth"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--insecure"));

  exposed.metrics_basic_auth_file = auth_file_;
  EXPECT_TRUE(Daemon::CheckSecurityOptions(exposed).ok());
  exposed.metrics_basic_auth_file.clear();
  exposed.insecure = true;
  EXPECT_TRUE(Daemon::CheckSecurityOptions(exposed).ok());

  // Loopback needs nothing; a disabled endpoint takes no credentials file.
  DaemonOptions local = Options();
  local.metrics_basic_auth_file.clear();
  EXPECT_TRUE(Daemon::CheckSecurityOptions(local).ok());
  DaemonOptions off = Options();
  off.metrics_listen = "none";
  s = Daemon::CheckSecurityOptions(off);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("--metrics-basic-auth needs /metrics on"));

  // The file must load, with its line.
  Write(auth_file_, "username: prometheus\nsha256: xyz\n");
  s = Daemon::CheckSecurityOptions(Options());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("--metrics-basic-auth: " + auth_file_ +
                        ":2: sha256 must be 64 hex digits"));
}

}  // namespace
}  // namespace server_metrics_auth_test
}  // namespace backfill
