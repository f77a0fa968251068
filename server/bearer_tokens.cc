#include "server/bearer_tokens.h"

#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/base/text_file.h"
#include "server/yaml_position.h"
#include "yaml-cpp/yaml.h"

namespace backfill {
namespace {

bool PrintableAscii(std::string_view text) {
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<BearerTokens> BearerTokens::Parse(std::string_view text,
                                                 const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() ? 1 : e.mark.line + 1;
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", line, ": not valid YAML: ", e.msg));
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        YamlPosition(source, root),
        "a token file is a map with one key, tokens: a list of {principal, "
        "roles, sha256}"));
  }
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    if (key != "tokens") {
      return absl::InvalidArgumentError(
          absl::StrCat(YamlPosition(source, kv.first), "unknown key '", key,
                       "' (a token file has one key, tokens)"));
    }
  }
  const YAML::Node list = root["tokens"];
  if (!list || !list.IsSequence() || list.size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        YamlPosition(source, list ? list : root),
        "tokens must be a non-empty list of {principal, roles, sha256}: a "
        "daemon that requires tokens and knows none lets no one in"));
  }
  std::vector<Entry> entries;
  std::set<Sha256Digest> digests;
  std::set<std::string> certificate_names;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    const std::string where =
        absl::StrCat(YamlPosition(source, item), "tokens[", i, "]");
    if (!item.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": must be a map {principal, roles, sha256}"));
    }
    for (const auto& kv : item) {
      const std::string key = kv.first.Scalar();
      if (key != "principal" && key != "roles" && key != "sha256" &&
          key != "client_certificate") {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": unknown key '", key,
                         "' (the keys are principal, roles, sha256 and "
                         "client_certificate)"));
      }
    }
    Entry entry;
    const YAML::Node name = item["principal"];
    if (!name || !name.IsScalar() || name.Scalar().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where,
                       ": principal is required (the name the audit "
                       "log and the jobs record)"));
    }
    entry.principal.name = name.Scalar();
    if (entry.principal.name.size() > kMaxPrincipalBytes ||
        !PrintableAscii(entry.principal.name) ||
        absl::StripAsciiWhitespace(entry.principal.name) !=
            entry.principal.name) {
      return absl::InvalidArgumentError(
          absl::StrCat(where,
                       ": principal must be printable ASCII without leading or "
                       "trailing spaces, at most ",
                       kMaxPrincipalBytes, " bytes"));
    }
    const YAML::Node roles = item["roles"];
    if (!roles || !roles.IsSequence() || roles.size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " (", entry.principal.name,
          "): roles must be a non-empty list of viewer, operator, approver, "
          "admin"));
    }
    for (const YAML::Node& r : roles) {
      absl::StatusOr<Role> role =
          r.IsScalar() ? ParseRole(r.Scalar())
                       : absl::InvalidArgumentError("a role is a name");
      if (!role.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, " (", entry.principal.name, "): ", role.status().message()));
      }
      entry.principal.roles.insert(*role);
    }
    const YAML::Node certificate = item["client_certificate"];
    if (certificate) {
      bool value = false;
      if (!certificate.IsScalar() ||
          !YAML::convert<bool>::decode(certificate, value)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " (", entry.principal.name,
                         "): client_certificate must be true or false"));
      }
      entry.client_certificate = value;
    }
    const YAML::Node sha = item["sha256"];
    if (!sha && !entry.client_certificate) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " (", entry.principal.name,
          "): sha256 is required: the SHA-256 of the token in hex "
          "(printf %s \"$TOKEN\" | sha256sum), unless the principal signs "
          "in with a client certificate (client_certificate: true)"));
    }
    if (sha) {
      absl::StatusOr<Sha256Digest> digest =
          sha.IsScalar()
              ? ParseHexDigest(sha.Scalar(), "token")
              : absl::InvalidArgumentError("sha256 must be 64 hex digits");
      if (!digest.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " (", entry.principal.name,
                         "): ", digest.status().message()));
      }
      if (!digests.insert(*digest).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, " (", entry.principal.name,
            "): the same sha256 as an earlier entry; one token must name one "
            "principal"));
      }
      entry.digest = *digest;
    }
    if (entry.client_certificate &&
        !certificate_names.insert(entry.principal.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " (", entry.principal.name,
          "): a second client_certificate entry for the same principal; a "
          "certificate's Common Name must name one set of roles"));
    }
    entries.push_back(std::move(entry));
  }
  return BearerTokens(std::move(entries));
}

absl::StatusOr<BearerTokens> BearerTokens::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path, "the token file");
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

std::optional<Principal> BearerTokens::Find(std::string_view token) const {
  if (token.empty() || token.size() > kMaxTokenBytes ||
      !PrintableAscii(token)) {
    return std::nullopt;
  }
  const Sha256Digest digest = Sha256Of(token);
  const Entry* found = nullptr;
  // Every entry is compared, each in constant time.
  for (const Entry& entry : entries_) {
    if (entry.digest.has_value() && SameDigest(*entry.digest, digest)) {
      found = &entry;
    }
  }
  if (found == nullptr) return std::nullopt;
  return found->principal;
}

}  // namespace backfill

namespace backfill {

std::optional<Principal> BearerTokens::FindCertificateHolder(
    std::string_view common_name) const {
  for (const Entry& entry : entries_) {
    if (entry.client_certificate && entry.principal.name == common_name) {
      return entry.principal;
    }
  }
  return std::nullopt;
}

bool BearerTokens::has_certificate_principals() const {
  for (const Entry& entry : entries_) {
    if (entry.client_certificate) return true;
  }
  return false;
}

}  // namespace backfill
