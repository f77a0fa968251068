#include "storage/sql/connection.h"

#include "core/base/status_macros.h"

namespace backfill::sql {

absl::StatusOr<Cell> Connection::Value(std::string_view sql,
                                       absl::Span<const Param> params) {
  ASSIGN_OR_RETURN(Result result, Exec(sql, params));
  if (result.rows.empty() || result.rows[0].empty()) {
    return absl::NotFoundError("the statement returned no row");
  }
  return std::move(result.rows[0][0]);
}

absl::StatusOr<int64_t> Connection::Int(std::string_view sql,
                                        absl::Span<const Param> params) {
  ASSIGN_OR_RETURN(Cell cell, Value(sql, params));
  return cell.integer;
}

absl::StatusOr<Transaction> Transaction::Begin(Connection* conn, TxnMode mode) {
  RETURN_IF_ERROR(conn->Begin(mode));
  return Transaction(conn);
}

absl::Status Transaction::Commit() {
  Connection* conn = std::exchange(conn_, nullptr);
  if (conn == nullptr) {
    return absl::FailedPreconditionError("the transaction has ended");
  }
  return conn->Commit();
}

void Transaction::Rollback() {
  Connection* conn = std::exchange(conn_, nullptr);
  if (conn != nullptr) conn->Rollback();
}

}  // namespace backfill::sql
