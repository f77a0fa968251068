#include "core/model/transform_sql.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/model/fingerprint.h"
#include "core/model/identifier.h"

namespace backfill {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

std::string StripTrailingSemicolons(std::string s) {
  while (!s.empty() && (s.back() == ';' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

SqlScan ScanSql(std::string_view sql) {
  SqlScan scan;
  bool pending_space = false;
  auto emit = [&](char c, bool in_literal) {
    if (pending_space && !scan.normalized.empty()) {
      scan.normalized.push_back(' ');
      scan.skeleton.push_back(' ');
    }
    pending_space = false;
    scan.normalized.push_back(c);
    if (!in_literal) scan.skeleton.push_back(c);
  };
  size_t i = 0;
  while (i < sql.size()) {
    const char c = sql[i];
    if (IsSpace(c)) {
      pending_space = true;
      ++i;
      continue;
    }
    if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      while (i < sql.size() && sql[i] != '\n') ++i;
      pending_space = true;
      continue;
    }
    if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
      size_t end = sql.find("*/", i + 2);
      if (end == std::string_view::npos) {
        scan.error = "unterminated /* comment";
        return scan;
      }
      i = end + 2;
      pending_space = true;
      continue;
    }
    if (scan.first_semicolon && c != ';') scan.text_after_semicolon = true;
    if (c == '\'' || c == '"' || c == '`' || c == '[') {
      const char quote = c == '[' ? ']' : c;
      emit(c, false);
      ++i;
      bool closed = false;
      while (i < sql.size()) {
        if (sql[i] == quote) {
          if (quote != ']' && i + 1 < sql.size() &&
              sql[i + 1] == quote) {  // doubled quote
            emit(quote, true);
            emit(quote, true);
            i += 2;
            continue;
          }
          closed = true;
          break;
        }
        emit(sql[i], true);
        ++i;
      }
      if (!closed) {
        scan.error = quote == '\'' ? "unterminated string literal"
                                   : "unterminated quoted identifier";
        return scan;
      }
      emit(quote, false);
      ++i;
      scan.significant_end = i;
      continue;
    }
    if (c == ';' && !scan.first_semicolon) {
      scan.first_semicolon = i;
      scan.statement_end = scan.significant_end;
    }
    emit(c, false);
    ++i;
    scan.significant_end = i;
  }
  if (!scan.first_semicolon) scan.statement_end = scan.significant_end;
  return scan;
}

std::string TransformVersion(std::string_view sql) {
  return HashHex(StripTrailingSemicolons(ScanSql(sql).normalized));
}

absl::StatusOr<std::string> CanonicalTransform(std::string_view sql,
                                               ExtraParameters extra) {
  const SqlScan scan = ScanSql(sql);
  if (!scan.error.empty()) return absl::InvalidArgumentError(scan.error);
  if (scan.skeleton.empty()) {
    return absl::InvalidArgumentError("the transform is empty");
  }
  if (scan.text_after_semicolon) {
    return absl::InvalidArgumentError(
        "the transform must be a single statement, but text follows a ';'");
  }
  // The first word must be SELECT or WITH.
  size_t n = 0;
  while (n < scan.skeleton.size() && IsIdentifierChar(scan.skeleton[n])) ++n;
  const std::string first = absl::AsciiStrToUpper(scan.skeleton.substr(0, n));
  if (first != "SELECT" && first != "WITH") {
    return absl::InvalidArgumentError(absl::StrCat(
        "the transform must be one SELECT (or WITH ... SELECT) statement, but "
        "it starts with \"",
        scan.skeleton.substr(0, std::max<size_t>(n, 1)), "\""));
  }
  // Parameters: only the bound ones. SQLite also knows ?, ?NNN, @name,
  // $name and #name; they would bind NULL (or fail) at run time, so they
  // are rejected here. "::" is a cast, not a parameter; '$' inside an
  // identifier (a$b) is part of it.
  constexpr char kOnlyBound[] =
      "; only :partition_start, :partition_end and :partition are bound "
      "(positional ? and ?NNN and @name, $name or #name parameters are not "
      "supported)";
  // SQLite's identifier characters; bytes >= 0x80 (UTF-8) count too.
  auto in_identifier = [](char c) {
    return IsIdentifierChar(c) || c == '$' ||
           static_cast<unsigned char>(c) >= 0x80;
  };
  const std::string& sk = scan.skeleton;
  for (size_t i = 0; i < sk.size(); ++i) {
    const char c = sk[i];
    if (c == ':') {
      if (i + 1 < sk.size() && sk[i + 1] == ':') {
        ++i;
        continue;
      }
      size_t j = i + 1;
      while (j < sk.size() && IsIdentifierChar(sk[j])) ++j;
      if (j == i + 1) continue;
      const std::string param = sk.substr(i + 1, j - i - 1);
      if (std::string problem = ParameterProblem(":" + param, extra);
          !problem.empty()) {
        return absl::InvalidArgumentError(problem);
      }
      i = j - 1;
      continue;
    }
    const bool starts_token = i == 0 || !in_identifier(sk[i - 1]);
    if (c == '?' || c == '@' || c == '#' || (c == '$' && starts_token)) {
      size_t j = i + 1;
      while (j < sk.size() &&
             (c == '?' ? sk[j] >= '0' && sk[j] <= '9' : in_identifier(sk[j]))) {
        ++j;
      }
      // A lone @, # or $ is no parameter (SQLite rejects it as a token).
      if (c != '?' && j == i + 1) continue;
      return absl::InvalidArgumentError(
          absl::StrCat("the transform uses the parameter ", sk.substr(i, j - i),
                       kOnlyBound));
    }
  }
  // Up to the statement's last significant character: comments after it
  // go, whether a ';' follows or not, so that the result is its own
  // canonical form.
  std::string out(sql.substr(0, scan.statement_end));
  absl::StripAsciiWhitespace(&out);
  return out;
}

}  // namespace backfill
