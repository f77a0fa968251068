#include "storage/sqlite/sqlite_bounded_functions.h"

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace backfill::sqlite {
namespace {

// The private in-memory connection on which a call within bounds runs
// SQLite's own function, with one statement per function and argument
// count ("SELECT instr(?1, ?2)").
class Builtins {
 public:
  static std::shared_ptr<Builtins> Open() {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(":memory:", &db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                        nullptr) != SQLITE_OK) {
      sqlite3_close(db);
      return nullptr;
    }
    return std::shared_ptr<Builtins>(new Builtins(db));
  }

  ~Builtins() {
    for (auto& [key, stmt] : statements_) sqlite3_finalize(stmt);
    sqlite3_close(db_);
  }

  // Sets the result of `context` to `name`(argv...) computed by SQLite,
  // under the limits of the connection `context` runs on.
  void Call(sqlite3_context* context, const std::string& name, int argc,
            sqlite3_value** argv) {
    sqlite3* caller = sqlite3_context_db_handle(context);
    for (int limit : {SQLITE_LIMIT_LENGTH, SQLITE_LIMIT_LIKE_PATTERN_LENGTH}) {
      sqlite3_limit(db_, limit, sqlite3_limit(caller, limit, -1));
    }
    sqlite3_stmt* stmt = Statement(name, argc);
    if (stmt == nullptr) {
      sqlite3_result_error(context, sqlite3_errmsg(db_), -1);
      return;
    }
    for (int i = 0; i < argc; ++i) sqlite3_bind_value(stmt, i + 1, argv[i]);
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
      // With its subtype: JSON made by json_patch stays JSON for the
      // function it is given to.
      sqlite3_result_value(context, sqlite3_column_value(stmt, 0));
    } else if (rc == SQLITE_TOOBIG) {
      sqlite3_result_error_toobig(context);
    } else if (rc == SQLITE_NOMEM) {
      sqlite3_result_error_nomem(context);
    } else {
      sqlite3_result_error(context, sqlite3_errmsg(db_), -1);
      sqlite3_result_error_code(context, rc);
    }
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
  }

 private:
  explicit Builtins(sqlite3* db) : db_(db) {}

  sqlite3_stmt* Statement(const std::string& name, int argc) {
    const std::string key = absl::StrCat(name, "/", argc);
    auto it = statements_.find(key);
    if (it != statements_.end()) return it->second;
    std::string sql = absl::StrCat("SELECT ", name, "(");
    for (int i = 1; i <= argc; ++i) {
      absl::StrAppend(&sql, i > 1 ? ", " : "", "?", i);
    }
    sql += ")";
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return nullptr;
    }
    statements_.emplace(key, stmt);
    return stmt;
  }

  sqlite3* db_;
  absl::flat_hash_map<std::string, sqlite3_stmt*> statements_;
};

// One registered function: its name, how its cost is bounded, and the
// connection that computes it.
struct Bounded {
  enum class Rule {
    // Arguments `first` and `second` are compared pair of bytes by pair of
    // bytes, at worst.
    kPairs,
    // printf/format: the repetitions of `%c` conversions.
    kCharRepetitions,
  };
  std::string name;
  std::string shown;  // in the refusal: "instr()", "LIKE"
  Rule rule;
  int first = 0;
  int second = 1;
  int64_t max_work;
  std::shared_ptr<Builtins> builtins;
};

// The bytes a value is compared over: a number's text is short.
int64_t Bytes(sqlite3_value* v) {
  switch (sqlite3_value_type(v)) {
    case SQLITE_NULL:
      return 0;
    case SQLITE_TEXT:
    case SQLITE_BLOB:
      return sqlite3_value_bytes(v);
    default:
      return 32;
  }
}

void Call(sqlite3_context* context, int argc, sqlite3_value** argv) {
  const auto* f = static_cast<const Bounded*>(sqlite3_user_data(context));
  switch (f->rule) {
    case Bounded::Rule::kPairs: {
      const int64_t a = Bytes(argv[f->first]);
      const int64_t b = Bytes(argv[f->second]);
      if (a > 0 && b > 0 && a > f->max_work / b) {
        const std::string message = absl::StrCat(
            f->shown, " of values of ", a, " and ", b,
            " bytes is refused: one call may compare at most ", f->max_work,
            " pairs of bytes (the product of the two sizes)");
        sqlite3_result_error(context, message.c_str(),
                             static_cast<int>(message.size()));
        return;
      }
      break;
    }
    case Bounded::Rule::kCharRepetitions: {
      if (argc == 0) break;
      const int limit = sqlite3_limit(sqlite3_context_db_handle(context),
                                      SQLITE_LIMIT_LENGTH, -1);
      // SQLite's printf gives NULL for a result its buffer, capped at the
      // length limit, could not hold (and an error for one a few bytes
      // over the limit that it did hold): far over the limit, NULL is its
      // answer; closer, SQLite computes it in little time.
      if (PrintfCharRepetitions(argc, argv) >
          2 * static_cast<uint64_t>(limit) + 1024) {
        sqlite3_result_null(context);
        return;
      }
      break;
    }
  }
  f->builtins->Call(context, f->name, argc, argv);
}

void Destroy(void* p) { delete static_cast<Bounded*>(p); }

}  // namespace

uint64_t PrintfCharRepetitions(int argc, sqlite3_value** argv) {
  const unsigned char* fmt = sqlite3_value_text(argv[0]);
  if (fmt == nullptr) return 0;
  int used = 1;
  auto next_int = [&]() -> int64_t {
    return used < argc ? sqlite3_value_int64(argv[used++]) : 0;
  };
  uint64_t total = 0;
  for (; *fmt != 0; ++fmt) {
    if (*fmt != '%') continue;
    unsigned char c = *++fmt;
    if (c == 0) break;
    int64_t precision = -1;
    bool done = false;
    do {
      switch (c) {
        case '-':
        case '+':
        case ' ':
        case '#':
        case '!':
        case '0':
        case ',':
          break;
        default:
          done = true;
          break;
        case 'l':
          c = *++fmt;
          if (c == 'l') c = *++fmt;
          done = true;
          break;
        case '1':
        case '2':
        case '3':
        case '4':
        case '5':
        case '6':
        case '7':
        case '8':
        case '9':
          while ((c = *++fmt) >= '0' && c <= '9') {
          }
          if (c != '.' && c != 'l') {
            done = true;
          } else {
            --fmt;
          }
          break;
        case '*':
          next_int();  // the width: padding is cheap past the limit
          if ((c = fmt[1]) != '.' && c != 'l') {
            c = *++fmt;
            done = true;
          }
          break;
        case '.':
          c = *++fmt;
          if (c == '*') {
            const int p = static_cast<int>(next_int());
            precision = p >= 0 ? p : (p >= -2147483647 ? -int64_t{p} : -1);
            c = *++fmt;
          } else {
            uint32_t px = 0;
            while (c >= '0' && c <= '9') {
              px = px * 10 + (c - '0');
              c = *++fmt;
            }
            precision = px & 0x7fffffff;
          }
          if (c == 'l') {
            --fmt;
          } else {
            done = true;
          }
          break;
      }
    } while (!done && (c = *++fmt) != 0);
    if (c == 0) break;
    if (c == '%' || c == 'n') continue;  // no argument
    if (c == 'c') {
      ++used;
      total += precision > 1 ? static_cast<uint64_t>(precision) : 1;
      continue;
    }
    static constexpr char kTakesOne[] = "dsgzqQwouxXfeEGipr";
    if (std::string_view(kTakesOne).find(static_cast<char>(c)) ==
        std::string_view::npos) {
      break;  // SQLite stops at an unknown conversion
    }
    ++used;
  }
  return total;
}

absl::Status InstallBoundedFunctions(Database* db, int64_t max_work) {
  std::shared_ptr<Builtins> builtins = Builtins::Open();
  if (builtins == nullptr) {
    return absl::ResourceExhaustedError(
        "bounded functions: could not open an in-memory connection");
  }
  struct Entry {
    const char* name;
    const char* shown;
    int argc;
    Bounded::Rule rule;
    int first;
    int second;
  };
  using Rule = Bounded::Rule;
  static constexpr Entry kEntries[] = {
      {"instr", "instr()", 2, Rule::kPairs, 0, 1},
      {"replace", "replace()", 3, Rule::kPairs, 0, 1},
      {"like", "LIKE", 2, Rule::kPairs, 0, 1},
      {"like", "LIKE", 3, Rule::kPairs, 0, 1},
      {"glob", "GLOB", 2, Rule::kPairs, 0, 1},
      {"ltrim", "ltrim()", 2, Rule::kPairs, 0, 1},
      {"rtrim", "rtrim()", 2, Rule::kPairs, 0, 1},
      {"trim", "trim()", 2, Rule::kPairs, 0, 1},
      {"json_patch", "json_patch()", 2, Rule::kPairs, 0, 1},
      {"printf", "printf()", -1, Rule::kCharRepetitions, 0, 0},
      {"format", "format()", -1, Rule::kCharRepetitions, 0, 0},
  };
  for (const Entry& e : kEntries) {
    auto* f = new Bounded{e.name,   e.shown,  e.rule,  e.first,
                          e.second, max_work, builtins};
    const int rc = sqlite3_create_function_v2(
        db->raw(), e.name, e.argc,
        SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, f, &Call,
        nullptr, nullptr, &Destroy);
    if (rc != SQLITE_OK) {
      // SQLite calls Destroy on failure too.
      return absl::InternalError(absl::StrCat(
          "bounded functions: registering ", e.name, ": ", sqlite3_errstr(rc)));
    }
  }
  return absl::OkStatus();
}

}  // namespace backfill::sqlite
