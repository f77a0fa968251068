#include "core/model/identifier.h"

#include "absl/strings/ascii.h"

namespace backfill {

bool IsIdentifierChar(char c) { return absl::ascii_isalnum(c) || c == '_'; }

bool IsIdentifier(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  if (!(absl::ascii_isalpha(s[0]) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(absl::ascii_isalnum(c) || c == '_')) return false;
  }
  return true;
}

}  // namespace backfill
