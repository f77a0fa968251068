#include "server/basic_auth_credentials.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/base/text_file.h"
#include "server/yaml_position.h"
#include "yaml-cpp/yaml.h"

namespace backfill {
namespace {

constexpr char kShape[] =
    "a basic auth file is a map {username: NAME, sha256: <SHA-256 of the "
    "password in hex>}";

}  // namespace

absl::StatusOr<BasicAuthCredentials> BasicAuthCredentials::Parse(
    std::string_view text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() ? 1 : e.mark.line + 1;
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", line, ": not valid YAML: ", e.msg));
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(YamlPosition(source, root), kShape));
  }
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    if (key != "username" && key != "sha256") {
      return absl::InvalidArgumentError(
          absl::StrCat(YamlPosition(source, kv.first), "unknown key '", key,
                       "' (the keys are username and sha256)"));
    }
  }
  const YAML::Node user = root["username"];
  if (!user || !user.IsScalar() || user.Scalar().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(YamlPosition(source, user ? user : root),
                     "username is required (the user name the scraper "
                     "sends with HTTP basic auth)"));
  }
  const std::string& name = user.Scalar();
  bool printable = true;
  for (char c : name) printable = printable && c >= 0x20 && c <= 0x7e;
  if (!printable || name.find(':') != std::string::npos ||
      name.size() > kMaxBasicAuthUserBytes ||
      absl::StripAsciiWhitespace(name) != name) {
    return absl::InvalidArgumentError(absl::StrCat(
        YamlPosition(source, user),
        "username must be printable ASCII without ':' and without leading "
        "or trailing spaces, at most ",
        kMaxBasicAuthUserBytes, " bytes"));
  }
  const YAML::Node sha = root["sha256"];
  if (!sha) {
    return absl::InvalidArgumentError(absl::StrCat(
        YamlPosition(source, root),
        "sha256 is required: the SHA-256 of the password in hex (printf %s "
        "\"$PASSWORD\" | sha256sum)"));
  }
  absl::StatusOr<Sha256Digest> digest =
      sha.IsScalar()
          ? ParseHexDigest(sha.Scalar(), "password")
          : absl::InvalidArgumentError("sha256 must be 64 hex digits");
  if (!digest.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(YamlPosition(source, sha), digest.status().message()));
  }
  return BasicAuthCredentials(name, *digest);
}

absl::StatusOr<BasicAuthCredentials> BasicAuthCredentials::Load(
    const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path, "the basic auth file");
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

bool BasicAuthCredentials::Matches(std::string_view username,
                                   std::string_view password) const {
  // Both compared whatever the first gives (no early exit).
  const bool user_ok = SameDigest(Sha256Of(username), username_digest_);
  const bool password_ok = SameDigest(Sha256Of(password), password_digest_);
  return user_ok & password_ok;
}

}  // namespace backfill
