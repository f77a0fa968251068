#include "storage/sqlite_membership.h"

#include <sqlite3.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace backfill::sqlite {
namespace {

// absl::string_view is not std::string_view in this abseil build.
absl::string_view Sv(std::string_view s) { return {s.data(), s.size()}; }

constexpr char kValueParam[] = ":_bf_p";
constexpr char kLoParam[] = ":_bf_lo";
constexpr char kHiParam[] = ":_bf_hi";

// _bf_partition_of(grain, value).
void PartitionOfFunction(sqlite3_context* context, int argc,
                         sqlite3_value** argv) {
  if (argc != 2 || sqlite3_value_type(argv[0]) != SQLITE_TEXT) {
    sqlite3_result_error(context, "_bf_partition_of(grain, value)", -1);
    return;
  }
  const char* grain_text =
      reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  absl::StatusOr<Grain> grain = ParseGrain(grain_text);
  if (!grain.ok()) {
    sqlite3_result_error(context, "_bf_partition_of: unknown grain", -1);
    return;
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
  const int rc = sqlite3_create_function_v2(
      db->raw(), kPartitionFunction, 2,
      SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, nullptr,
      &PartitionOfFunction, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    return absl::InternalError(absl::StrCat("sqlite: cannot register ",
                                            kPartitionFunction, ": ",
                                            sqlite3_errstr(rc)));
  }
  return absl::OkStatus();
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

absl::Status BindMembership(Statement& statement, Grain grain,
                            const std::string& partition) {
  ASSIGN_OR_RETURN(CandidateRange range, StoredRangeOf(grain, partition));
  const std::pair<const char*, const std::string*> params[] = {
      {kValueParam, &partition}, {kLoParam, &range.lo}, {kHiParam, &range.hi}};
  for (const auto& [name, value] : params) {
    const int index = statement.ParameterIndex(name);
    if (index > 0) RETURN_IF_ERROR(statement.BindText(index, *value));
  }
  return absl::OkStatus();
}

}  // namespace backfill::sqlite
