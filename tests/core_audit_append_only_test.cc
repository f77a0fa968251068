// The audit log is append-only: no source of the repository may change or
// remove its rows. This test reads every source file under
// BACKFILL_SOURCE_DIR (C++, SQL, Python, shell; not build directories) and
// fails, naming file and line, on
//   - UPDATE [OR ...] audit_events, DELETE FROM audit_events,
//     REPLACE INTO audit_events (INSERT OR REPLACE deletes the old row),
//     DROP TABLE audit_events, ALTER TABLE audit_events (a rename or a
//     dropped column), and DROP TRIGGER audit_events_... (the triggers that
//     make the database refuse changes) — with the name quoted in any way
//     ("", '', ``, []) or schema-qualified (main.audit_events), and also
//     when the words are separated by comments (/* */, --, //), by the end
//     of one C++ string literal and the start of the next
//     ("DELETE FROM "\n"audit_events"), or by an escaped \n, \r or \t
//     inside one literal, and
//   - the bare table name as a string literal ("audit_events"), which is
//     how a statement with a computed table name would be built.
// A statement may opt out with the marker `append-only-check: allowed` on
// its line or the line above (a test that checks the database refuses such
// a statement). Only tests may: the marker anywhere outside tests/ is a
// finding itself. The state store also refuses UPDATE, DELETE and a
// rewrite of an existing event (INSERT OR REPLACE) with triggers
// (storage/sqlite/state/state_migrations.cc).

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "re2/re2.h"

namespace backfill {
namespace core_audit_append_only_test {
namespace {

namespace fs = std::filesystem;

constexpr char kAllowed[] = "append-only-check: allowed";

struct Finding {
  int line = 0;
  std::string text;
};

// Whitespace, a comment (SQL or C++), the end of one string literal and the
// start of the next, or an escaped newline or tab inside a literal.
#define COMMENT R"(/\*(?s:.*?)\*/|--[^\n]*\n|//[^\n]*\n)"
#define GAP R"((?:\s|\\[nrt]|)" COMMENT R"(|"(?:\s|)" COMMENT R"()*")+)"
// An optional quote before a name (escaped in C++: \").
#define QUOTE R"((?:\\?["'`\[])?)"
// An optional schema ("main." or quoted), then the table name.
#define TABLE "(?:" QUOTE R"(\w+(?:\\?["'`\]])?\.)?)" QUOTE R"(audit_events\b)"

// The line of `content` that holds byte `pos`.
std::string LineAt(const std::string& content, size_t pos) {
  const size_t newline = content.rfind('\n', pos);
  const size_t begin = newline == std::string::npos ? 0 : newline + 1;
  const size_t end = content.find('\n', pos);
  return content.substr(begin, end == std::string::npos ? end : end - begin);
}

std::vector<Finding> FindAuditWrites(const std::string& content) {
  static const RE2 kWrite("(?i)(\\b(?:UPDATE" GAP "(?:OR" GAP "\\w+" GAP
                          ")?|DELETE" GAP "FROM" GAP "|REPLACE" GAP "INTO" GAP
                          "|(?:DROP|ALTER)" GAP "TABLE" GAP "(?:IF" GAP
                          "EXISTS" GAP ")?)" TABLE "|\\bDROP" GAP "TRIGGER" GAP
                          "(?:IF" GAP "EXISTS" GAP ")?(?:" QUOTE
                          R"(\w+(?:\\?["'`\]])?\.)?)" QUOTE "audit_events_)");
  static const RE2 kBareName(R"((?i)("\s*audit_events\s*"))");
#undef TABLE
#undef QUOTE
#undef GAP
#undef COMMENT
  std::vector<Finding> out;
  for (const RE2* re : {&kWrite, &kBareName}) {
    EXPECT_TRUE(re->ok()) << re->pattern() << ": " << re->error();
    re2::StringPiece rest(content);
    re2::StringPiece match;
    while (RE2::FindAndConsume(&rest, *re, &match)) {
      const size_t at = static_cast<size_t>(match.data() - content.data());
      const size_t last = at + match.size() - 1;
      // The marker may sit on the line where the statement starts or ends,
      // or on the line just above it.
      const size_t line_start = content.rfind('\n', at);
      const std::string above =
          line_start == std::string::npos || line_start == 0
              ? std::string()
              : LineAt(content, line_start - 1);
      if (absl::StrContains(LineAt(content, at), kAllowed) ||
          absl::StrContains(LineAt(content, last), kAllowed) ||
          absl::StrContains(above, kAllowed)) {
        continue;
      }
      Finding f;
      f.line = 1 + static_cast<int>(
                       std::count(content.begin(), content.begin() + at, '\n'));
      f.text = std::string(match);
      out.push_back(std::move(f));
    }
  }
  return out;
}

TEST(AuditAppendOnlyTest, MatcherCatchesWritesAndIgnoresReadsAndInserts) {
  const std::vector<std::string> bad = {
      "db.Exec(\"UPDATE audit_events SET message = ''\");",
      "db.Exec(\"update   \\\"audit_events\\\" set at = 0\");",
      "Prepare(\"UPDATE OR IGNORE audit_events SET x = 1\")",
      "Prepare(\"DELETE FROM audit_events WHERE seq < ?1\")",
      "Prepare(\"DELETE FROM \"\n      \"audit_events WHERE 1\")",
      "Prepare(\"INSERT OR REPLACE INTO audit_events (seq) VALUES (1)\")",
      "Exec(\"DROP TABLE IF EXISTS audit_events\")",
      "for (const char* t : {\"check_results\", \"audit_events\"})",
      // Schema-qualified, quoted or not.
      "Exec(\"DELETE FROM main.audit_events\")",
      "Exec(\"DELETE FROM \\\"main\\\".\\\"audit_events\\\"\")",
      "Exec(\"UPDATE temp.audit_events SET at = 0\")",
      // Quoted with single quotes, backquotes or brackets.
      "Exec(\"DELETE FROM 'audit_events'\")",
      "Exec(\"DELETE FROM `audit_events`\")",
      "Exec(\"DELETE FROM [audit_events]\")",
      // The triggers that make the database refuse changes.
      "Exec(\"DROP TRIGGER audit_events_append_only_delete\")",
      "Exec(\"DROP TRIGGER IF EXISTS main.audit_events_append_only_update\")",
      // A rename, or a dropped column.
      "Exec(\"ALTER TABLE audit_events RENAME TO old_events\")",
      "Exec(\"ALTER TABLE main.audit_events DROP COLUMN message\")",
      // Comments between the words.
      "Exec(\"DELETE /* c */ FROM audit_events\")",
      "Exec(\"DELETE -- all\n FROM audit_events\")",
      "Exec(\"DELETE FROM \"  // split\n  \"audit_events\")",
      // Escaped newline or tab inside one literal.
      "Exec(\"DELETE\\nFROM audit_events\")",
      "Exec(\"UPDATE\\taudit_events SET at = 0\")",
  };
  for (const std::string& text : bad) {
    EXPECT_FALSE(FindAuditWrites(text).empty()) << text;
  }
  const std::vector<std::string> good = {
      "Prepare(\"INSERT INTO audit_events (job_id) VALUES (?1)\")",
      "Prepare(\"SELECT seq FROM audit_events WHERE job_id = ?1\")",
      "CREATE INDEX audit_events_by_job ON audit_events (job_id, seq);",
      "CREATE TRIGGER t BEFORE UPDATE ON audit_events BEGIN END;",
      "CREATE TRIGGER t BEFORE DELETE ON audit_events BEGIN END;",
      "Prepare(\"UPDATE jobs SET state = ?2\")  // not the audit table",
      "Exec(\"DELETE FROM audit_events_copy\")",
      "Exec(\"DROP TRIGGER jobs_audit\")",
      "Exec(\"ALTER TABLE audit_events_copy ADD COLUMN x\")",
      "Exec(\"SELECT * FROM main.audit_events\")",
      "Exec(\"DELETE FROM audit_events\")  // append-only-check: allowed",
      "// append-only-check: allowed\nExec(\"DELETE FROM audit_events\")",
  };
  EXPECT_EQ(FindAuditWrites("// append-only-check: allowed\n\nExec(\"DELETE "
                            "FROM audit_events\")")
                .size(),
            1u);
  for (const std::string& text : good) {
    EXPECT_TRUE(FindAuditWrites(text).empty()) << text;
  }
}

TEST(AuditAppendOnlyTest, NoSourceUpdatesOrDeletesAuditEvents) {
  const fs::path root = BACKFILL_SOURCE_DIR;
  const fs::path self = fs::path(__FILE__).filename();
  std::vector<std::string> findings;
  int scanned = 0;
  bool saw_state_store = false;
  for (auto it = fs::recursive_directory_iterator(root);
       it != fs::recursive_directory_iterator(); ++it) {
    const fs::path& path = it->path();
    const std::string name = path.filename().string();
    if (it->is_directory()) {
      if (!name.empty() && (name[0] == '.' || absl::StartsWith(name, "build") ||
                            name == "third_party")) {
        it.disable_recursion_pending();
      }
      continue;
    }
    const std::string ext = path.extension().string();
    if (ext != ".cc" && ext != ".h" && ext != ".sql" && ext != ".py" &&
        ext != ".sh") {
      continue;
    }
    if (path.filename() == self) continue;
    std::ifstream in(path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    ++scanned;
    const std::string relative = fs::relative(path, root).string();
    if (relative == "storage/sqlite/state/state_migrations.cc")
      saw_state_store = true;
    const std::string content = buffer.str();
    for (const Finding& f : FindAuditWrites(content)) {
      findings.push_back(absl::StrCat(relative, ":", f.line, ": ", f.text));
    }
    // Only tests may opt out (to check that the database refuses).
    if (!absl::StartsWith(relative, "tests/")) {
      for (size_t at = content.find(kAllowed); at != std::string::npos;
           at = content.find(kAllowed, at + 1)) {
        findings.push_back(absl::StrCat(
            relative, ":",
            1 + std::count(content.begin(), content.begin() + at, '\n'),
            ": the opt-out marker \"", kAllowed, "\" is for tests only"));
      }
    }
  }
  EXPECT_GT(scanned, 100) << "scanned too few files under " << root;
  EXPECT_TRUE(saw_state_store)
      << "storage/sqlite/state/state_migrations.cc not scanned";
  EXPECT_THAT(findings, ::testing::IsEmpty())
      << "the audit log (audit_events) is append-only: never UPDATE, "
         "DELETE, REPLACE or DROP it";
}

}  // namespace
}  // namespace core_audit_append_only_test
}  // namespace backfill
