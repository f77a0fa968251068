// End-to-end: the real backfilld started with --auth-tokens, driven by the
// real backfillctl as its users would: without a token, with a token no one
// was given, with a viewer's token (reads allowed, a submit refused) and an
// operator's (the submit runs and records who asked); refusals logged
// without the token; a bad token file and an exposed --listen without
// --insecure stop the daemon at start with exit 2; the CLI over mutual
// TLS with certificates made by openssl, its principal from its certificate;
// and /metrics behind --metrics-basic-auth (curl without credentials, with
// a wrong and with the right password), which an exposed --metrics-listen
// needs unless --insecure is given.
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/bearer_tokens.h"
#include "tests/testing/e2e_support.h"
#include "tests/testing/test_pki.h"
#include "tests/testing/token_file.h"

namespace backfill {
namespace e2e_auth_test {
namespace {

using namespace ::backfill::e2e;  // NOLINT: test support
namespace fs = std::filesystem;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kVera = "vera-7b1d0e55c2a94f3e8d6a";
constexpr const char* kOlivia = "olivia-3c9e2f71a8b04d6e5f1b";
constexpr const char* kAda = "ada-91f0c3d5e7b2a4c6d8e0";

class AuthE2eTest : public E2eTest {
 protected:
  std::string WriteTokens() {
    const std::string path = root_ + "/tokens.yaml";
    WriteFile(path,
              testing::TokenFileText({{"vera", "viewer", kVera},
                                      {"olivia", "operator, approver", kOlivia},
                                      {"ada", "admin", kAda}}));
    return path;
  }

  RunResult As(const Daemon& daemon, const char* token,
               std::vector<std::string> args) {
    std::vector<std::string> argv = {"--server", daemon.address()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> env;
    if (token != nullptr) env.push_back(absl::StrCat("BACKFILL_TOKEN=", token));
    return RawCtl(argv, env, seconds(120));
  }
};

TEST_F(AuthE2eTest, ADeniedAndAnAllowedCallFromTheCli) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/5, /*orders_per_day=*/20, false));
  const std::string tokens = WriteTokens();
  Daemon& daemon = NewDaemon();
  daemon.set_extra_args({"--auth-tokens", tokens});
  daemon.set_ctl_token(kAda);
  ASSERT_TRUE(daemon.Start());
  EXPECT_THAT(ReadFile(daemon.log()),
              HasSubstr("authentication on: 3 token(s) from " + tokens));

  RunResult anonymous = As(daemon, nullptr, {"datasets"});
  EXPECT_EQ(anonymous.exit_code, 1) << anonymous;
  EXPECT_THAT(anonymous.err, HasSubstr("UNAUTHENTICATED"));
  EXPECT_THAT(anonymous.err, HasSubstr("give one with $BACKFILL_TOKEN"));

  RunResult stranger = As(daemon, "not-a-token", {"datasets"});
  EXPECT_EQ(stranger.exit_code, 1) << stranger;
  EXPECT_THAT(stranger.err, HasSubstr("not one this backfilld knows"));

  RunResult read = As(daemon, kVera, {"datasets"});
  EXPECT_EQ(read.exit_code, 0) << read;
  EXPECT_THAT(read.out, HasSubstr("daily_revenue"));

  const std::vector<std::string> submit = {
      "submit", "daily_revenue", "--from",         "2025-01-01",
      "--to",   "2025-01-03",    "--reason",       "refunds were ignored",
      "--wait", "--json",        "--requested-by", "ci-nightly"};
  RunResult denied = As(daemon, kVera, submit);
  EXPECT_EQ(denied.exit_code, 1) << denied;
  EXPECT_THAT(denied.err,
              HasSubstr("PERMISSION_DENIED: principal vera (roles: viewer) may "
                        "not call SubmitBackfill: it requires the operator "
                        "role"));

  RunResult allowed = As(daemon, kOlivia, submit);
  ASSERT_EQ(allowed.exit_code, 0) << allowed;
  EXPECT_EQ(JsonString(allowed.out, "state"), "BACKFILL_STATE_SUCCEEDED");
  EXPECT_EQ(JsonString(allowed.out, "requested_by"),
            "olivia (on behalf of ci-nightly)");

  // The refusals are in the log, with the principal, never with a token.
  const std::string log = ReadFile(daemon.log());
  EXPECT_THAT(log, HasSubstr("refused SubmitBackfill"));
  EXPECT_THAT(log, HasSubstr("principal vera (roles: viewer)"));
  for (const char* token : {kVera, kOlivia, kAda, "not-a-token"}) {
    EXPECT_THAT(log, Not(HasSubstr(token)));
  }
  ASSERT_NO_FATAL_FAILURE(ExpectCleanSigterm(daemon));
}

TEST_F(AuthE2eTest, ABadTokenFileOrAnExposedPortStopsTheStart) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/2, /*orders_per_day=*/5, false));
  const std::string bad = root_ + "/bad-tokens.yaml";
  WriteFile(bad, "tokens:\n  - {principal: vera, roles: [viewer]}\n");
  RunResult started =
      RunProcess({Bin("backfilld"), "--data-dir", data_dir_, "--pipelines",
                  pipelines_dir_, "--listen", "127.0.0.1:0", "--metrics-listen",
                  "none", "--auth-tokens", bad},
                 root_, seconds(60));
  EXPECT_EQ(started.exit_code, 2) << started;
  EXPECT_THAT(started.err,
              HasSubstr("--auth-tokens: " + bad +
                        ":2: tokens[0] (vera): sha256 is required"));

  started = RunProcess(
      {Bin("backfilld"), "--data-dir", data_dir_, "--pipelines", pipelines_dir_,
       "--listen", "0.0.0.0:0", "--metrics-listen", "none"},
      root_, seconds(60));
  EXPECT_EQ(started.exit_code, 2) << started;
  EXPECT_THAT(started.err, HasSubstr("can be reached from other machines"));
  EXPECT_THAT(started.err, HasSubstr("--insecure"));
}

TEST_F(AuthE2eTest, TheCliOverMutualTls) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/3, /*orders_per_day=*/10, false));
  const std::string pki = root_ + "/pki";
  fs::create_directories(pki);
  ASSERT_TRUE(testing::MakeTestPki(pki, {"deploy-bot"}));
  const std::string tokens = root_ + "/tokens.yaml";
  WriteFile(tokens,
            "tokens:\n  - {principal: deploy-bot, roles: [operator], "
            "client_certificate: true}\n");
  Daemon& daemon = NewDaemon();
  // TLS, client certificates required, and the certificate's Common Name
  // as the principal.
  daemon.set_extra_args({"--tls-cert", pki + "/server.pem", "--tls-key",
                         pki + "/server.key", "--tls-client-ca",
                         pki + "/ca.pem", "--auth-tokens", tokens});
  ASSERT_TRUE(daemon.Spawn());
  const std::vector<std::string> tls_env = {
      "BACKFILL_TLS_CA=" + pki + "/ca.pem",
      "BACKFILL_TLS_CERT=" + pki + "/deploy-bot.pem",
      "BACKFILL_TLS_KEY=" + pki + "/deploy-bot.key"};
  RunResult datasets;
  for (int i = 0; i < 300; ++i) {
    datasets = RawCtl({"--server", daemon.address(), "datasets"}, tls_env);
    if (datasets.exit_code == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(datasets.exit_code, 0) << datasets << ReadFile(daemon.log());
  EXPECT_THAT(datasets.out, HasSubstr("daily_revenue"));

  // Plaintext, or TLS without the client certificate: no connection, and
  // the CLI says what may be missing.
  RunResult plain = RawCtl({"--server", daemon.address(), "datasets"});
  EXPECT_EQ(plain.exit_code, 1) << plain;
  EXPECT_THAT(plain.err, HasSubstr("UNAVAILABLE"));
  RunResult no_cert = RawCtl(
      {"--server", daemon.address(), "--tls-ca", pki + "/ca.pem", "datasets"});
  EXPECT_EQ(no_cert.exit_code, 1) << no_cert;
  EXPECT_THAT(no_cert.err, HasSubstr("UNAVAILABLE"));

  RunResult submit = RawCtl({"--server", daemon.address(), "--json", "submit",
                             "daily_revenue", "--from", "2025-01-01", "--to",
                             "2025-01-03", "--reason", "deploy hook", "--wait"},
                            tls_env, seconds(120));
  ASSERT_EQ(submit.exit_code, 0) << submit;
  // The principal is the certificate's; backfillctl's default name (the
  // local user) is kept only as "on behalf of".
  EXPECT_THAT(JsonString(submit.out, "requested_by"),
              ::testing::StartsWith("deploy-bot (on behalf of "));
  EXPECT_THAT(ReadFile(daemon.log()),
              HasSubstr("client certificates required and verified"));
  ASSERT_NO_FATAL_FAILURE(ExpectCleanSigterm(daemon));
}

TEST_F(AuthE2eTest, MetricsBehindBasicAuth) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/2, /*orders_per_day=*/5, false));
  // printf %s 'correct horse battery staple' | sha256sum
  const std::string auth = root_ + "/metrics-auth.yaml";
  WriteFile(auth,
            "username: prometheus\n"
            "sha256: c4bbcb1fbec99d65bf59d85c8cb62ee2db963f0fe106f483d9afa73bd"
            "4e39a8a\n");
  Daemon& daemon = NewDaemon();
  daemon.set_extra_args({"--metrics-basic-auth", auth});
  ASSERT_TRUE(daemon.Start());
  const std::string url =
      absl::StrCat("http://127.0.0.1:", daemon.metrics_port(), "/metrics");
  // curl prints the status code; --user sends HTTP basic auth.
  auto status_of = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {"/usr/bin/curl", "-s", "-o",
                                     "/dev/null",     "-w", "%{http_code}"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(url);
    RunResult curl = RunProcess(argv, root_, seconds(60));
    EXPECT_EQ(curl.exit_code, 0) << curl;
    return curl.out;
  };
  EXPECT_EQ(status_of({}), "401");
  EXPECT_EQ(status_of({"--user", "prometheus:correct horse"}), "401");
  EXPECT_EQ(status_of({"--user", "prometheus:correct horse battery staple"}),
            "200");
  ASSERT_NO_FATAL_FAILURE(ExpectCleanSigterm(daemon));
}

TEST_F(AuthE2eTest, AnExposedMetricsPortWithoutBasicAuthStopsTheStart) {
  ASSERT_NO_FATAL_FAILURE(Prepare(/*days=*/2, /*orders_per_day=*/5, false));
  RunResult started = RunProcess(
      {Bin("backfilld"), "--data-dir", data_dir_, "--pipelines", pipelines_dir_,
       "--listen", "127.0.0.1:0", "--metrics-listen", "0.0.0.0:0"},
      root_, seconds(60));
  EXPECT_EQ(started.exit_code, 2) << started;
  EXPECT_THAT(started.err,
              HasSubstr("--metrics-listen 0.0.0.0:0 can be reached from other "
                        "machines"));
  EXPECT_THAT(started.err, HasSubstr("--metrics-basic-auth"));

  const std::string bad = root_ + "/bad-metrics-auth.yaml";
  WriteFile(bad, "username: prometheus\npassword: hunter2\n");
  started =
      RunProcess({Bin("backfilld"), "--data-dir", data_dir_, "--pipelines",
                  pipelines_dir_, "--listen", "127.0.0.1:0", "--metrics-listen",
                  "0.0.0.0:0", "--metrics-basic-auth", bad},
                 root_, seconds(60));
  EXPECT_EQ(started.exit_code, 2) << started;
  EXPECT_THAT(started.err, HasSubstr("--metrics-basic-auth: " + bad +
                                     ":2: unknown key 'password'"));

  // A limit out of range stops the start too.
  started =
      RunProcess({Bin("backfilld"), "--data-dir", data_dir_, "--pipelines",
                  pipelines_dir_, "--listen", "127.0.0.1:0", "--metrics-listen",
                  "none", "--max-queued-jobs", "0"},
                 root_, seconds(60));
  EXPECT_EQ(started.exit_code, 2) << started;
  EXPECT_THAT(started.err, HasSubstr("--max-queued-jobs 0 is out of range"));
}

}  // namespace
}  // namespace e2e_auth_test
}  // namespace backfill
