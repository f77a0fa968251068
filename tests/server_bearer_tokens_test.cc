// The token file (server/bearer_tokens.h) and the access policy
// (server/access_policy.h): a file as an administrator writes it loads and
// finds each principal by its token; every kind of mistake in the file is
// refused naming the entry and line; tokens that could not be one are never
// found; digests are those of sha256sum; roles include what the policy says
// they include; and the name recorded for an action.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/access_policy.h"
#include "server/bearer_tokens.h"

namespace backfill {
namespace server_bearer_tokens_test {
namespace {

using ::testing::HasSubstr;

std::string Digest(const std::string& token) {
  return HexDigest(Sha256Of(token));
}

TEST(Sha256Test, MatchesTheStandardTestVectors) {
  // FIPS 180-2 examples.
  EXPECT_EQ(Digest("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Digest(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(BearerTokensTest, FindsEachPrincipalByItsToken) {
  const std::string file = absl::StrCat(
      "# who may call backfilld\n"
      "tokens:\n"
      "  - {principal: vera, roles: [viewer], sha256: ",
      Digest("vera-token"),
      "}\n"
      "  - principal: olivia\n"
      "    roles: [operator, approver]\n"
      "    sha256: ",
      // Upper case hex is the same digest.
      absl::AsciiStrToUpper(Digest("olivia-token")), "\n");
  auto tokens = BearerTokens::Parse(file, "tokens.yaml");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->size(), 2u);
  auto vera = tokens->Find("vera-token");
  ASSERT_TRUE(vera.has_value());
  EXPECT_EQ(vera->name, "vera");
  EXPECT_EQ(vera->roles, std::set<Role>{Role::kViewer});
  auto olivia = tokens->Find("olivia-token");
  ASSERT_TRUE(olivia.has_value());
  EXPECT_EQ(olivia->name, "olivia");
  EXPECT_EQ(olivia->roles, (std::set<Role>{Role::kOperator, Role::kApprover}));
  // Anything else is no one.
  for (const std::string& other :
       {std::string("vera-token "), std::string("VERA-TOKEN"),
        std::string("vera"), std::string(""), std::string("vera-token\n"),
        std::string(kMaxTokenBytes + 1, 'a'), Digest("vera-token")}) {
    EXPECT_FALSE(tokens->Find(other).has_value()) << other;
  }
}

TEST(BearerTokensTest, RefusesEveryMistakeNamingTheEntryAndLine) {
  const std::string ok = Digest("t");
  struct Case {
    std::string text;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"tokens: [", "tokens.yaml:1: not valid YAML"},
      {"- a\n- b\n", "a map with one key, tokens"},
      {"tokens: []\n", "non-empty list"},
      {"tokens:\n", "non-empty list"},
      {"token:\n  - {principal: a, roles: [viewer], sha256: " + ok + "}\n",
       "tokens.yaml:1: unknown key 'token'"},
      {"tokens:\n  - {principal: a, roles: [viewer], sha265: " + ok + "}\n",
       "tokens.yaml:2: tokens[0]: unknown key 'sha265'"},
      {"tokens:\n  - {roles: [viewer], sha256: " + ok + "}\n",
       "tokens[0]: principal is required"},
      {"tokens:\n  - {principal: 'a\tb', roles: [viewer], sha256: " + ok +
           "}\n",
       "printable ASCII"},
      {"tokens:\n  - {principal: ' a', roles: [viewer], sha256: " + ok + "}\n",
       "without leading or trailing spaces"},
      {"tokens:\n  - {principal: " + std::string(kMaxPrincipalBytes + 1, 'a') +
           ", roles: [viewer], sha256: " + ok + "}\n",
       "at most 128 bytes"},
      {"tokens:\n  - {principal: a, sha256: " + ok + "}\n",
       "tokens[0] (a): roles must be a non-empty list"},
      {"tokens:\n  - {principal: a, roles: [], sha256: " + ok + "}\n",
       "roles must be a non-empty list"},
      {"tokens:\n  - {principal: a, roles: [root], sha256: " + ok + "}\n",
       "tokens[0] (a): unknown role 'root'"},
      {"tokens:\n  - {principal: a, roles: viewer, sha256: " + ok + "}\n",
       "roles must be a non-empty list"},
      {"tokens:\n  - {principal: a, roles: [viewer]}\n", "sha256 is required"},
      {"tokens:\n  - {principal: a, roles: [viewer], sha256: abc}\n",
       "64 hex digits (the SHA-256 of the token, as sha256sum prints it), not "
       "3 characters"},
      {"tokens:\n  - {principal: a, roles: [viewer], sha256: " +
           std::string(63, 'a') + "g}\n",
       "64 hex digits (0-9, a-f)"},
      {"tokens:\n  - {principal: a, roles: [viewer], sha256: " + ok +
           "}\n  - {principal: b, roles: [admin], sha256: " + ok + "}\n",
       "tokens.yaml:3: tokens[1] (b): the same sha256 as an earlier entry"},
      {"tokens:\n  - just a string\n", "tokens[0]: must be a map"},
  };
  for (const Case& c : cases) {
    auto tokens = BearerTokens::Parse(c.text, "tokens.yaml");
    ASSERT_FALSE(tokens.ok()) << c.text;
    EXPECT_EQ(tokens.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(tokens.status().message(), HasSubstr(c.says)) << c.text;
  }
}

TEST(BearerTokensTest, ClientCertificatePrincipals) {
  const std::string file = absl::StrCat(
      "tokens:\n"
      "  - {principal: deploy-bot, roles: [operator], client_certificate: "
      "true}\n"
      "  - {principal: olivia, roles: [approver], sha256: ",
      Digest("olivia-token"),
      ", client_certificate: yes}\n"
      "  - {principal: vera, roles: [viewer], sha256: ",
      Digest("vera-token"), ", client_certificate: false}\n");
  auto tokens = BearerTokens::Parse(file, "tokens.yaml");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_TRUE(tokens->has_certificate_principals());
  EXPECT_EQ(tokens->FindCertificateHolder("deploy-bot")->roles,
            std::set<Role>{Role::kOperator});
  EXPECT_EQ(tokens->FindCertificateHolder("olivia")->name, "olivia");
  EXPECT_EQ(tokens->Find("olivia-token")->name, "olivia");
  // vera signs in with her token only; no name is found by prefix or case.
  EXPECT_FALSE(tokens->FindCertificateHolder("vera").has_value());
  EXPECT_FALSE(tokens->FindCertificateHolder("Deploy-bot").has_value());
  EXPECT_FALSE(tokens->FindCertificateHolder("deploy").has_value());

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"tokens:\n  - {principal: a, roles: [viewer], client_certificate: "
       "maybe}\n",
       "client_certificate must be true or false"},
      {"tokens:\n  - {principal: a, roles: [viewer], client_certificate: "
       "false}\n",
       "sha256 is required"},
      {"tokens:\n  - {principal: a, roles: [viewer], client_certificate: "
       "true}\n  - {principal: a, roles: [admin], client_certificate: "
       "true}\n",
       "a second client_certificate entry for the same principal"},
  };
  for (const auto& [text, says] : bad) {
    EXPECT_THAT(BearerTokens::Parse(text, "t.yaml").status().message(),
                HasSubstr(says))
        << text;
  }
  auto plain = BearerTokens::Parse(
      absl::StrCat("tokens:\n  - {principal: a, roles: [viewer], sha256: ",
                   Digest("a"), "}\n"),
      "t.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->has_certificate_principals());
}

TEST(BearerTokensTest, LoadsAFileAndSaysWhyItCannot) {
  std::string dir =
      (std::filesystem::temp_directory_path() / "tokens-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string path = dir + "/tokens.yaml";
  EXPECT_EQ(BearerTokens::Load(path).status().code(),
            absl::StatusCode::kNotFound);
  {
    std::ofstream out(path);
    out << "tokens:\n  - {principal: ada, roles: [admin], sha256: "
        << Digest("ada-token") << "}\n";
  }
  auto tokens = BearerTokens::Load(path);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->Find("ada-token")->name, "ada");
  {
    std::ofstream out(path);
    out << "tokens:\n  - {principal: ada, roles: [admin]}\n";
  }
  EXPECT_THAT(BearerTokens::Load(path).status().message(),
              HasSubstr(path + ":2: tokens[0] (ada): sha256 is required"));
  std::filesystem::remove_all(dir);
}

TEST(AccessPolicyTest, RolesIncludeWhatTheyShould) {
  auto may = [](std::set<Role> roles, const char* method) {
    return MayCall(Principal{"p", std::move(roles)}, method);
  };
  // Viewer reads; operator and approver read too; admin does everything.
  EXPECT_TRUE(may({Role::kViewer}, "ListBackfills"));
  EXPECT_FALSE(may({Role::kViewer}, "SubmitBackfill"));
  EXPECT_FALSE(may({Role::kViewer}, "ApproveBackfill"));
  EXPECT_TRUE(may({Role::kOperator}, "WatchBackfill"));
  EXPECT_TRUE(may({Role::kOperator}, "SubmitBackfill"));
  EXPECT_FALSE(may({Role::kOperator}, "RollbackBackfill"));
  EXPECT_TRUE(may({Role::kApprover}, "DiffBackfill"));
  EXPECT_TRUE(may({Role::kApprover}, "RollbackBackfill"));
  EXPECT_FALSE(may({Role::kApprover}, "CancelBackfill"));
  EXPECT_TRUE(may({Role::kOperator, Role::kApprover}, "ApproveBackfill"));
  EXPECT_TRUE(may({Role::kAdmin}, "RollbackBackfill"));
  EXPECT_FALSE(may({}, "ListDatasets"));
  // An operation the policy does not know: admins only.
  EXPECT_FALSE(RequiredRole("DropEverything").has_value());
  EXPECT_FALSE(
      may({Role::kViewer, Role::kOperator, Role::kApprover}, "DropEverything"));
  EXPECT_TRUE(may({Role::kAdmin}, "DropEverything"));
}

TEST(AccessPolicyTest, RoleNamesRoundTrip) {
  for (Role role :
       {Role::kViewer, Role::kOperator, Role::kApprover, Role::kAdmin}) {
    EXPECT_EQ(*ParseRole(RoleName(role)), role);
  }
  EXPECT_THAT(ParseRole("Viewer").status().message(),
              HasSubstr("viewer, operator, approver and admin"));
  EXPECT_EQ(RoleList({Role::kApprover, Role::kViewer}), "viewer, approver");
}

TEST(AccessPolicyTest, ActingNameKeepsAClaimedNameOnlyOnBehalf) {
  const std::optional<Principal> olivia = Principal{"olivia", {}};
  EXPECT_EQ(ActingName(olivia, "", "x"), "olivia");
  EXPECT_EQ(ActingName(olivia, "olivia", "x"), "olivia");
  EXPECT_EQ(ActingName(olivia, "bob", "x"), "olivia (on behalf of bob)");
  EXPECT_EQ(ActingName(std::nullopt, "bob", "x"), "bob");
  EXPECT_EQ(ActingName(std::nullopt, "", "unknown (peer)"), "unknown (peer)");
}

}  // namespace
}  // namespace server_bearer_tokens_test
}  // namespace backfill
