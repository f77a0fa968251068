#include "storage/sqlite/sqlite_fingerprint_function.h"

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"

namespace backfill::sqlite {
namespace {

// The running sum of one group; SQLite zeroes it on first use.
struct FingerprintSum {
  uint64_t sum;
};

// The hash of the row of values `argv` (as HashCurrentRow hashes a
// statement's row of the same values) in `*hash`; false when SQLite ran out
// of memory reading a value.
bool HashValues(int argc, sqlite3_value** argv, uint64_t* hash) {
  // One buffer per thread for every row (as HashCurrentRow).
  thread_local RowHasher h;
  h.Clear();
  for (int i = 0; i < argc; ++i) {
    sqlite3_value* v = argv[i];
    switch (sqlite3_value_type(v)) {
      case SQLITE_NULL:
        h.AddNull();
        break;
      case SQLITE_INTEGER:
        h.AddInt(sqlite3_value_int64(v));
        break;
      case SQLITE_FLOAT:
        h.AddReal(sqlite3_value_double(v));
        break;
      case SQLITE_TEXT: {
        const unsigned char* text = sqlite3_value_text(v);
        if (text == nullptr) return false;
        h.AddText(std::string_view(reinterpret_cast<const char*>(text),
                                   sqlite3_value_bytes(v)));
        break;
      }
      default: {  // SQLITE_BLOB
        const void* blob = sqlite3_value_blob(v);
        const int n = sqlite3_value_bytes(v);
        h.AddBlob(blob != nullptr
                      ? std::string_view(static_cast<const char*>(blob), n)
                      : std::string_view());
        break;
      }
    }
  }
  *hash = h.Finish();
  return true;
}

void FingerprintStep(sqlite3_context* context, int argc, sqlite3_value** argv) {
  auto* acc = static_cast<FingerprintSum*>(
      sqlite3_aggregate_context(context, sizeof(FingerprintSum)));
  uint64_t hash = 0;
  if (acc == nullptr || !HashValues(argc, argv, &hash)) {
    sqlite3_result_error_nomem(context);
    return;
  }
  acc->sum += hash;
}

void RowHash(sqlite3_context* context, int argc, sqlite3_value** argv) {
  uint64_t hash = 0;
  if (!HashValues(argc, argv, &hash)) {
    sqlite3_result_error_nomem(context);
    return;
  }
  sqlite3_result_int64(context, static_cast<sqlite3_int64>(hash));
}

void FingerprintFinal(sqlite3_context* context) {
  // No rows: no context was allocated, and the sum is 0.
  auto* acc =
      static_cast<FingerprintSum*>(sqlite3_aggregate_context(context, 0));
  sqlite3_result_int64(context, static_cast<sqlite3_int64>(acc ? acc->sum : 0));
}

// The table column a result column reads, when it reads one as it is.
struct ColumnOrigin {
  std::string database, table, column;
  bool operator==(const ColumnOrigin& o) const {
    return database == o.database && table == o.table && column == o.column;
  }
  bool operator!=(const ColumnOrigin& o) const { return !(*this == o); }
};

std::optional<ColumnOrigin> OriginOf(const Statement& q, int i) {
  const char* database = sqlite3_column_database_name(q.raw(), i);
  const char* table = sqlite3_column_table_name(q.raw(), i);
  const char* column = sqlite3_column_origin_name(q.raw(), i);
  if (database == nullptr || table == nullptr || column == nullptr) {
    return std::nullopt;
  }
  return ColumnOrigin{database, table, column};
}

}  // namespace

absl::Status RegisterFingerprintFunction(Database* db) {
  const int rc = sqlite3_create_function_v2(
      db->raw(), kFingerprintFunction, -1, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
      nullptr, nullptr, &FingerprintStep, &FingerprintFinal, nullptr);
  if (rc != SQLITE_OK) {
    return absl::InternalError(absl::StrCat("sqlite: cannot register ",
                                            kFingerprintFunction, ": ",
                                            sqlite3_errstr(rc)));
  }
  return absl::OkStatus();
}

absl::Status RegisterRowHashFunction(Database* db) {
  const int rc = sqlite3_create_function_v2(
      db->raw(), kRowHashFunction, -1,
      SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, nullptr, &RowHash,
      nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    return absl::InternalError(absl::StrCat("sqlite: cannot register ",
                                            kRowHashFunction, ": ",
                                            sqlite3_errstr(rc)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Fingerprint> FingerprintQuery::Run(Statement& q) const {
  if (!aggregate) return HashRows(q);
  ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) {
    return absl::InternalError(
        absl::StrCat("sqlite: fingerprint query returned no row: ", q.Sql()));
  }
  const uint64_t sum = static_cast<uint64_t>(q.ColumnInt(0));
  const int64_t rows = q.ColumnInt(1);
  return Fingerprint::FromSum(sum, rows);
}

absl::StatusOr<FingerprintQuery> MakeFingerprintQuery(Database* db,
                                                      std::string_view columns,
                                                      std::string_view rest) {
  FingerprintQuery out;
  out.sql = absl::StrCat("SELECT ", Sv(columns), " ", Sv(rest));
  // Compiled (not run) for its result columns: how many, and for "*" which.
  ASSIGN_OR_RETURN(Statement select, db->Prepare(out.sql));
  const int n = select.ColumnCount();
  if (n == 0 || n > kMaxFingerprintColumns) return out;
  std::string list(columns);
  if (absl::StripAsciiWhitespace(Sv(columns)) == "*") {
    // Each column by its name, provided the name selects that very column
    // again (checked below): a result column computed by a view has no
    // origin, a name that resolved to nothing would be taken for a string
    // literal, and of two columns of one name the second would read the
    // first.
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i) {
      if (!OriginOf(select, i)) return out;
      names.push_back(QuoteIdentifier(select.ColumnName(i)));
    }
    list = absl::StrJoin(names, ", ");
    ASSIGN_OR_RETURN(Statement named,
                     db->Prepare(absl::StrCat("SELECT ", list, " ", Sv(rest))));
    if (named.ColumnCount() != n) return out;
    for (int i = 0; i < n; ++i) {
      if (OriginOf(named, i) != OriginOf(select, i)) return out;
    }
  }
  out.sql = absl::StrCat("SELECT ", kFingerprintFunction, "(", list,
                         "), COUNT(*) ", Sv(rest));
  out.aggregate = true;
  return out;
}

absl::StatusOr<FingerprintQuery> FingerprintQueryCache::Get(
    Database* db, std::string_view columns, std::string_view rest) {
  std::pair<int64_t, int64_t> schema;
  {
    ASSIGN_OR_RETURN(Statement q,
                     db->PrepareCached("PRAGMA main.schema_version"));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return absl::InternalError("no main.schema_version");
    schema.first = q.ColumnInt(0);
  }
  {
    ASSIGN_OR_RETURN(Statement q,
                     db->PrepareCached("PRAGMA temp.schema_version"));
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return absl::InternalError("no temp.schema_version");
    schema.second = q.ColumnInt(0);
  }
  if (schema != schema_ || entries_.size() >= kMaxEntries) {
    entries_.clear();
    schema_ = schema;
  }
  std::pair<std::string, std::string> key(columns, rest);
  auto it = entries_.find(key);
  if (it != entries_.end()) return it->second;
  ASSIGN_OR_RETURN(FingerprintQuery made,
                   MakeFingerprintQuery(db, columns, rest));
  entries_.emplace(std::move(key), made);
  return made;
}

}  // namespace backfill::sqlite
