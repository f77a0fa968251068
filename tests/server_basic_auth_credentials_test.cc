// Tests of BasicAuthCredentials: the /metrics basic auth file is checked in
// full with file:line errors, and only the right user name and password
// match. The digest below is sha256sum's output for the password, computed
// outside the code under test.

#include <cctype>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/basic_auth_credentials.h"

namespace backfill {
namespace server_basic_auth_credentials_test {
namespace {

using ::testing::HasSubstr;

constexpr char kPassword[] = "correct horse battery staple";
// printf %s 'correct horse battery staple' | sha256sum
constexpr char kDigest[] =
    "c4bbcb1fbec99d65bf59d85c8cb62ee2db963f0fe106f483d9afa73bd4e39a8a";

TEST(BasicAuthCredentialsTest, OnlyTheRightUserAndPasswordMatch) {
  auto credentials = BasicAuthCredentials::Parse(
      std::string("username: prometheus\nsha256: ") + kDigest + "\n",
      "auth.yaml");
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  EXPECT_EQ(credentials->username(), "prometheus");
  EXPECT_TRUE(credentials->Matches("prometheus", kPassword));
  EXPECT_FALSE(credentials->Matches("prometheus", "correct horse"));
  EXPECT_FALSE(credentials->Matches("prometheus", ""));
  EXPECT_FALSE(credentials->Matches("Prometheus", kPassword));
  EXPECT_FALSE(credentials->Matches("", kPassword));
  // The digest may be written in upper case too.
  std::string upper = kDigest;
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  auto again = BasicAuthCredentials::Parse(
      "{username: prometheus, sha256: " + upper + "}", "auth.yaml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->Matches("prometheus", kPassword));
}

TEST(BasicAuthCredentialsTest, ProblemsAreRefusedWithFileAndLine) {
  const std::string digest = kDigest;
  const struct {
    std::string text;
    std::string error;
  } cases[] = {
      {"username: prometheus\nsha256: " + digest + "\npassword: x\n",
       "auth.yaml:3: unknown key 'password'"},
      {"sha256: " + digest + "\n", "auth.yaml:1: username is required"},
      {"username: prometheus\n", "auth.yaml:1: sha256 is required"},
      {"username: prometheus\nsha256: abc\n",
       "auth.yaml:2: sha256 must be 64 hex digits (the SHA-256 of the "
       "password, as sha256sum prints it), not 3 characters"},
      {"username: prometheus\nsha256: " + std::string(64, 'g') + "\n",
       "auth.yaml:2: sha256 must be 64 hex digits (0-9, a-f)"},
      {"username: \"a:b\"\nsha256: " + digest + "\n",
       "auth.yaml:1: username must be printable ASCII without ':'"},
      {"username: " + std::string(129, 'u') + "\nsha256: " + digest + "\n",
       "at most 128 bytes"},
      {"- prometheus\n", "auth.yaml:1: a basic auth file is a map"},
      {"username: [\n", "auth.yaml:2: not valid YAML"},
  };
  for (const auto& c : cases) {
    auto parsed = BasicAuthCredentials::Parse(c.text, "auth.yaml");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(c.error))
        << c.text;
  }
}

TEST(BasicAuthCredentialsTest, AMissingFileIsNotFound) {
  auto loaded = BasicAuthCredentials::Load("/nonexistent/metrics-auth.yaml");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(loaded.status().message()),
              HasSubstr("/nonexistent/metrics-auth.yaml"));
}

}  // namespace
}  // namespace server_basic_auth_credentials_test
}  // namespace backfill
