#include "storage/sql/named_parameters.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace backfill::sql {
namespace {

constexpr size_t kNone = std::string_view::npos;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The first byte of a name, a word or a dollar-quote tag.
bool IsNameStart(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}

// A later byte of a dollar-quote tag.
bool IsTagChar(char c) { return IsNameStart(c) || IsDigit(c); }

// A later byte of a name or a word (PostgreSQL's ident_cont).
bool IsNameChar(char c) { return IsTagChar(c) || c == '$'; }

absl::Status Unterminated(std::string_view what, size_t offset) {
  return absl::InvalidArgumentError(
      absl::StrCat("unterminated ", absl::string_view(what.data(), what.size()),
                   " starting at byte offset ", offset));
}

class Translator {
 public:
  explicit Translator(std::string_view sql) : sql_(sql) {}

  absl::StatusOr<PositionalSql> Run() {
    size_t i = 0;
    while (i < sql_.size()) {
      const char c = sql_[i];
      absl::StatusOr<size_t> next = i + 1;
      if (c == '\'') {
        next = SkipString(i, i, /*backslash_escapes=*/false);
      } else if (c == '"') {
        next = SkipQuotedIdentifier(i);
      } else if (c == '-' && At(i + 1) == '-') {
        next = SkipLineComment(i);
      } else if (c == '/' && At(i + 1) == '*') {
        next = SkipBlockComment(i);
      } else if (c == '$') {
        next = SkipDollar(i);
      } else if (IsNameStart(c)) {
        next = SkipWord(i);
      } else if (c == ':') {
        next = Colon(i);
      }
      if (!next.ok()) return next.status();
      i = *next;
    }
    out_.text.append(sql_.substr(copied_));
    return std::move(out_);
  }

 private:
  // The byte at `i`, or '\0' past the end (the checks below never look for
  // '\0', so a NUL byte in the text is just a byte).
  char At(size_t i) const { return i < sql_.size() ? sql_[i] : '\0'; }

  // A quoted string whose first quote is at `quote` (`start` is where it
  // begins, before any E prefix): past its last quote, following
  // continuations onto later quoted segments.
  absl::StatusOr<size_t> SkipString(size_t start, size_t quote,
                                    bool backslash_escapes) {
    size_t i = quote + 1;
    while (i < sql_.size()) {
      const char c = sql_[i];
      if (backslash_escapes && c == '\\') {
        i += 2;
      } else if (c != '\'') {
        ++i;
      } else if (At(i + 1) == '\'') {
        i += 2;
      } else if (const size_t more = ContinuingQuote(i + 1); more != kNone) {
        i = more + 1;
      } else {
        return i + 1;
      }
    }
    return Unterminated(
        backslash_escapes ? "escape string (E'...')" : "quoted string (')",
        start);
  }

  // Where a quoted string that ended just before `from` continues: the
  // offset of the next segment's opening quote when only whitespace with at
  // least one newline, and -- comments each ended by a newline, come first
  // (PostgreSQL's string continuation); otherwise kNone.
  size_t ContinuingQuote(size_t from) const {
    bool newline = false;
    size_t i = from;
    while (i < sql_.size()) {
      const char c = sql_[i];
      if (c == '\n' || c == '\r') {
        newline = true;
        ++i;
      } else if (c == ' ' || c == '\t' || c == '\f' || c == '\v') {
        ++i;
      } else if (c == '-' && At(i + 1) == '-') {
        i = sql_.find_first_of("\r\n", i);
        if (i == kNone) return kNone;
      } else {
        break;
      }
    }
    return newline && At(i) == '\'' ? i : kNone;
  }

  absl::StatusOr<size_t> SkipQuotedIdentifier(size_t start) {
    size_t i = start + 1;
    while (i < sql_.size()) {
      if (sql_[i] != '"') {
        ++i;
      } else if (At(i + 1) == '"') {
        i += 2;
      } else {
        return i + 1;
      }
    }
    return Unterminated("quoted identifier (\")", start);
  }

  size_t SkipLineComment(size_t start) const {
    const size_t end = sql_.find_first_of("\r\n", start);
    return end == kNone ? sql_.size() : end;
  }

  absl::StatusOr<size_t> SkipBlockComment(size_t start) {
    int depth = 1;
    size_t i = start + 2;
    while (i < sql_.size()) {
      if (sql_[i] == '/' && At(i + 1) == '*') {
        ++depth;
        i += 2;
      } else if (sql_[i] == '*' && At(i + 1) == '/') {
        i += 2;
        if (--depth == 0) return i;
      } else {
        ++i;
      }
    }
    return Unterminated("block comment (/*)", start);
  }

  // A '$' that starts a token: a positional parameter (refused), a
  // dollar-quoted string, or a lone '$' left for PostgreSQL to judge.
  absl::StatusOr<size_t> SkipDollar(size_t start) {
    size_t i = start + 1;
    if (IsDigit(At(i))) {
      while (IsDigit(At(i))) ++i;
      const std::string_view param = sql_.substr(start, i - start);
      return absl::InvalidArgumentError(absl::StrCat(
          "the statement has the positional parameter ",
          absl::string_view(param.data(), param.size()), " at byte offset ",
          start,
          "; use only named parameters (:name): they are numbered $1..$n "
          "when the statement is translated, so a positional one would "
          "silently stand for another value"));
    }
    if (IsNameStart(At(i))) {
      while (IsTagChar(At(i))) ++i;
    }
    if (At(i) != '$') return start + 1;
    const std::string_view delimiter = sql_.substr(start, i + 1 - start);
    const size_t end = sql_.find(delimiter, i + 1);
    if (end == kNone) return Unterminated("dollar-quoted string", start);
    out_.has_dollar_quote = true;
    return end + delimiter.size();
  }

  // A word (keyword or identifier, '$' included past its first byte), or
  // the E of an escape string.
  absl::StatusOr<size_t> SkipWord(size_t start) {
    size_t i = start + 1;
    while (IsNameChar(At(i))) ++i;
    if (i == start + 1 && (sql_[start] == 'E' || sql_[start] == 'e') &&
        At(i) == '\'') {
      out_.has_escape_string = true;
      return SkipString(start, i, /*backslash_escapes=*/true);
    }
    word_end_ = i;
    return i;
  }

  absl::StatusOr<size_t> Colon(size_t start) {
    const char next = At(start + 1);
    if (next == ':') return start + 2;  // the cast operator
    if (next == '\'' || next == '"') {
      return absl::InvalidArgumentError(absl::StrCat(
          "a ':' directly before a quote at byte offset ", start,
          " (psql's :'name' or :\"name\") names no parameter; write :name "
          "(values are always bound), or put a space after a slice's ':'"));
    }
    if (!IsNameStart(next)) return start + 1;
    size_t end = start + 2;
    while (IsNameChar(At(end))) ++end;
    const std::string_view name = sql_.substr(start, end - start);
    if (start == word_end_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the parameter ", absl::string_view(name.data(), name.size()),
          " at byte offset ", start,
          " directly follows a word, which PostgreSQL would read together "
          "with its $n as one identifier; put a space before the ':' (in an "
          "array slice a[lo:hi], write a[lo: hi])"));
    }
    auto [it, inserted] = numbers_.try_emplace(name, out_.names.size() + 1);
    if (inserted) {
      if (out_.names.size() == kMaxParameters) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the statement has more than ", kMaxParameters,
            " distinct parameters (the most PostgreSQL binds), the next at "
            "byte offset ",
            start));
      }
      out_.names.emplace_back(name);
    }
    out_.text.append(sql_.substr(copied_, start - copied_));
    absl::StrAppend(&out_.text, "$", it->second);
    copied_ = end;
    return end;
  }

  const std::string_view sql_;
  PositionalSql out_;
  size_t copied_ = 0;        // sql_ before this offset is in out_.text
  size_t word_end_ = kNone;  // just past the last word (keyword, identifier)
  absl::flat_hash_map<std::string_view, size_t> numbers_;
};

}  // namespace

absl::StatusOr<PositionalSql> ToPositional(std::string_view sql) {
  return Translator(sql).Run();
}

}  // namespace backfill::sql
