#include "storage/sqlite/sqlite_membership.h"

#include <sqlite3.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"
#include "core/model/partition_layout.h"

namespace backfill::sqlite {
namespace {

constexpr char kValueParam[] = ":_bf_p";
constexpr char kLoParam[] = ":_bf_lo";
constexpr char kHiParam[] = ":_bf_hi";

// The storage class of a value as PartitionOfSqlValue takes it; nullopt
// for REAL, BLOB and NULL (which belong to no partition).
std::optional<ColumnType> TypeOf(sqlite3_value* value) {
  switch (sqlite3_value_type(value)) {
    case SQLITE_TEXT:
      return ColumnType::kText;
    case SQLITE_INTEGER:
      return ColumnType::kInteger;
    default:
      return std::nullopt;
  }
}

// _bf_partition_of(time_grain, time_value, key_value): time x key.
void TimeKeyPartitionOfFunction(sqlite3_context* context,
                                sqlite3_value** argv) {
  const char* grain_text =
      reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  absl::StatusOr<Grain> grain = ParseGrain(grain_text);
  if (!grain.ok() || !IsTimeGrain(*grain)) {
    sqlite3_result_error(context, "_bf_partition_of: not a time grain", -1);
    return;
  }
  std::optional<ColumnType> time_type = TypeOf(argv[1]);
  std::optional<ColumnType> key_type = TypeOf(argv[2]);
  if (!time_type || !key_type) {
    sqlite3_result_null(context);
    return;
  }
  const unsigned char* time = sqlite3_value_text(argv[1]);
  const int time_bytes = sqlite3_value_bytes(argv[1]);
  const unsigned char* key = sqlite3_value_text(argv[2]);
  const int key_bytes = sqlite3_value_bytes(argv[2]);
  if (time == nullptr || key == nullptr) {
    sqlite3_result_error_nomem(context);
    return;
  }
  std::optional<std::string> partition = PartitionOfSqlValues(
      *grain, *time_type,
      std::string_view(reinterpret_cast<const char*>(time), time_bytes),
      *key_type,
      std::string_view(reinterpret_cast<const char*>(key), key_bytes));
  if (!partition) {
    sqlite3_result_null(context);
    return;
  }
  sqlite3_result_text(context, partition->data(),
                      static_cast<int>(partition->size()), SQLITE_TRANSIENT);
}

// _bf_partition_of(grain, value), or the time x key form with three
// arguments.
void PartitionOfFunction(sqlite3_context* context, int argc,
                         sqlite3_value** argv) {
  if ((argc != 2 && argc != 3) || sqlite3_value_type(argv[0]) != SQLITE_TEXT) {
    sqlite3_result_error(context, "_bf_partition_of(grain, value[, key_value])",
                         -1);
    return;
  }
  if (argc == 3) {
    TimeKeyPartitionOfFunction(context, argv);
    return;
  }
  // The grain is a literal in every statement the engine writes: parsed
  // once per statement, and kept with it by SQLite for the next rows.
  const Grain* grain =
      static_cast<const Grain*>(sqlite3_get_auxdata(context, 0));
  Grain parsed;
  if (grain == nullptr) {
    const char* grain_text =
        reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
    absl::StatusOr<Grain> g =
        ParseGrain(grain_text != nullptr ? grain_text : "");
    if (!g.ok()) {
      sqlite3_result_error(context, "_bf_partition_of: unknown grain", -1);
      return;
    }
    parsed = *g;
    grain = &parsed;
    sqlite3_set_auxdata(context, 0, new Grain(parsed),
                        [](void* p) { delete static_cast<Grain*>(p); });
  }
  ColumnType type;
  switch (sqlite3_value_type(argv[1])) {
    case SQLITE_TEXT:
      type = ColumnType::kText;
      break;
    case SQLITE_INTEGER:
      type = ColumnType::kInteger;
      break;
    default:  // REAL, BLOB and NULL belong to no partition
      sqlite3_result_null(context);
      return;
  }
  const unsigned char* text = sqlite3_value_text(argv[1]);
  const int bytes = sqlite3_value_bytes(argv[1]);
  if (text == nullptr) {
    sqlite3_result_error_nomem(context);
    return;
  }
  std::optional<std::string> partition = PartitionOfSqlValue(
      *grain, type,
      std::string_view(reinterpret_cast<const char*>(text), bytes));
  if (!partition) {
    sqlite3_result_null(context);
    return;
  }
  sqlite3_result_text(context, partition->data(),
                      static_cast<int>(partition->size()), SQLITE_TRANSIENT);
}

}  // namespace

absl::Status RegisterPartitionFunction(Database* db) {
  for (int args : {2, 3}) {
    const int rc = sqlite3_create_function_v2(
        db->raw(), kPartitionFunction, args,
        SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, nullptr,
        &PartitionOfFunction, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) {
      return absl::InternalError(absl::StrCat("sqlite: cannot register ",
                                              kPartitionFunction, ": ",
                                              sqlite3_errstr(rc)));
    }
  }
  return absl::OkStatus();
}

std::optional<std::string> PartitionOfSqlValues(Grain time_grain,
                                                ColumnType time_type,
                                                std::string_view time_text,
                                                ColumnType key_type,
                                                std::string_view key_text) {
  if (!IsTimeGrain(time_grain) || time_type != ColumnType::kText) {
    return std::nullopt;
  }
  if (key_type != ColumnType::kText && key_type != ColumnType::kInteger) {
    return std::nullopt;
  }
  absl::StatusOr<std::string> partition =
      PartitionOfValues(time_grain, time_text, key_text);
  if (!partition.ok()) return std::nullopt;
  return *std::move(partition);
}

std::optional<std::string> PartitionOfSqlValue(Grain grain, ColumnType type,
                                               std::string_view text) {
  if (grain == Grain::kNone) return std::string();
  if (type == ColumnType::kInteger && grain != Grain::kKey) return std::nullopt;
  if (type != ColumnType::kText && type != ColumnType::kInteger) {
    return std::nullopt;
  }
  absl::StatusOr<std::string> partition = PartitionOfValue(grain, text);
  if (!partition.ok()) return std::nullopt;
  return *std::move(partition);
}

std::string MembershipCondition(Grain grain, std::string_view column,
                                std::string_view value, std::string_view lo,
                                std::string_view hi) {
  const std::string exact =
      absl::StrCat(kPartitionFunction, "('", GrainName(grain), "', ",
                   Sv(column), ") = ", Sv(value));
  switch (grain) {
    case Grain::kNone:
      return "1";
    case Grain::kKey:
      // An INTEGER value may hold a key: CAST covers a column without
      // numeric affinity (in one with it, the text equality converts).
      return absl::StrCat("((", Sv(column), " = ", Sv(value), " OR ",
                          Sv(column), " = CAST(", Sv(value),
                          " AS INTEGER)) AND ", exact, ")");
    case Grain::kHour:
    case Grain::kDay:
    case Grain::kMonth:
      return absl::StrCat("(", Sv(column), " >= ", Sv(lo), " AND ", Sv(column),
                          " < ", Sv(hi), " AND ", exact, ")");
  }
  return "0";
}

std::string MembershipConditionParams(Grain grain, std::string_view column) {
  return MembershipCondition(grain, column, kValueParam, kLoParam, kHiParam);
}

std::string CandidateConditionParams(Grain grain, std::string_view column) {
  switch (grain) {
    case Grain::kNone:
      return "1";
    case Grain::kKey:
      return absl::StrCat("(", Sv(column), " = ", kValueParam, " OR ",
                          Sv(column), " = CAST(", kValueParam, " AS INTEGER))");
    case Grain::kHour:
    case Grain::kDay:
    case Grain::kMonth:
      return absl::StrCat("(", Sv(column), " >= ", kLoParam, " AND ",
                          Sv(column), " < ", kHiParam, ")");
  }
  return "0";
}

absl::StatusOr<CandidateRange> StoredRangeOf(Grain grain,
                                             const std::string& partition) {
  RETURN_IF_ERROR(ValidatePartition(grain, partition));
  if (!IsTimeGrain(grain)) return CandidateRange{};
  return CandidateRangeOf(grain, partition);
}

namespace {

// Binds the value and its stored range to the parameters the statement
// uses (a membership test may use only some of them).
absl::Status BindValueAndRange(Statement& statement,
                               const std::string& partition,
                               const CandidateRange& range) {
  const std::pair<const char*, const std::string*> params[] = {
      {kValueParam, &partition}, {kLoParam, &range.lo}, {kHiParam, &range.hi}};
  for (const auto& [name, value] : params) {
    const int index = statement.ParameterIndex(name);
    if (index > 0) RETURN_IF_ERROR(statement.BindText(index, *value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status BindMembership(Statement& statement, Grain grain,
                            const std::string& partition) {
  ASSIGN_OR_RETURN(CandidateRange range, StoredRangeOf(grain, partition));
  return BindValueAndRange(statement, partition, range);
}

// ----------------------------------------- any dataset (1-D or time x key) --

namespace {

std::string Column(const DatasetSpec& ds, std::string_view qualifier) {
  return absl::StrCat(Sv(qualifier), QuoteIdentifier(ds.partition->column));
}
std::string KeyColumn(const DatasetSpec& ds, std::string_view qualifier) {
  return absl::StrCat(Sv(qualifier), QuoteIdentifier(ds.partition->key_column));
}

}  // namespace

std::string PartitionExpression(const DatasetSpec& ds,
                                std::string_view qualifier) {
  if (!ds.partition) return "''";
  if (!ds.two_dimensional()) {
    return absl::StrCat(kPartitionFunction, "('", GrainName(ds.grain()), "', ",
                        Column(ds, qualifier), ")");
  }
  return absl::StrCat(kPartitionFunction, "('", GrainName(ds.grain()), "', ",
                      Column(ds, qualifier), ", ", KeyColumn(ds, qualifier),
                      ")");
}

std::string PartitionGroupBy(const DatasetSpec& ds,
                             std::string_view qualifier) {
  if (!ds.partition) return "";
  std::string out = absl::StrCat(Column(ds, qualifier), " COLLATE BINARY");
  if (ds.two_dimensional()) {
    absl::StrAppend(&out, ", ", KeyColumn(ds, qualifier), " COLLATE BINARY");
  }
  return out;
}

std::string PartitionColumns(const DatasetSpec& ds,
                             std::string_view qualifier) {
  if (!ds.partition) return "";
  std::string out = Column(ds, qualifier);
  if (ds.two_dimensional())
    absl::StrAppend(&out, ", ", KeyColumn(ds, qualifier));
  return out;
}

std::string MembershipCondition(const DatasetSpec& ds,
                                std::string_view qualifier,
                                std::string_view value, std::string_view lo,
                                std::string_view hi) {
  if (!ds.partition) return "1";
  if (!ds.two_dimensional()) {
    return MembershipCondition(ds.grain(), Column(ds, qualifier), value, lo,
                               hi);
  }
  const std::string col = Column(ds, qualifier);
  return absl::StrCat("(", col, " >= ", Sv(lo), " AND ", col, " < ", Sv(hi),
                      " AND ", PartitionExpression(ds, qualifier), " = ",
                      Sv(value), ")");
}

std::string MembershipConditionParams(const DatasetSpec& ds,
                                      std::string_view qualifier) {
  return MembershipCondition(ds, qualifier, kValueParam, kLoParam, kHiParam);
}

std::string CandidateConditionParams(const DatasetSpec& ds,
                                     std::string_view qualifier) {
  if (!ds.partition) return "1";
  if (!ds.two_dimensional()) {
    return CandidateConditionParams(ds.grain(), Column(ds, qualifier));
  }
  const std::string col = Column(ds, qualifier);
  return absl::StrCat("(", col, " >= ", kLoParam, " AND ", col, " < ", kHiParam,
                      ")");
}

absl::StatusOr<CandidateRange> StoredRangeOf(const DatasetSpec& ds,
                                             const std::string& partition) {
  if (!ds.two_dimensional()) return StoredRangeOf(ds.grain(), partition);
  return CandidateRangeOf(ds.layout(), partition);
}

absl::Status BindMembership(Statement& statement, const DatasetSpec& ds,
                            const std::string& partition) {
  if (!ds.two_dimensional()) {
    return BindMembership(statement, ds.grain(), partition);
  }
  ASSIGN_OR_RETURN(CandidateRange range, StoredRangeOf(ds, partition));
  return BindValueAndRange(statement, partition, range);
}

std::optional<std::string> PartitionOfRow(const DatasetSpec& ds,
                                          const Statement& row, int first) {
  if (!ds.two_dimensional()) {
    return PartitionOfSqlValue(ds.grain(), row.GetColumnType(first),
                               row.ColumnText(first));
  }
  return PartitionOfSqlValues(
      ds.grain(), row.GetColumnType(first), row.ColumnText(first),
      row.GetColumnType(first + 1), row.ColumnText(first + 1));
}

}  // namespace backfill::sqlite
