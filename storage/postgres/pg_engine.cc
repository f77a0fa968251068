#include "storage/postgres/pg_engine.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "storage/postgres/pg_contract.h"
#include "storage/postgres/pg_markers.h"
#include "storage/postgres/pg_membership.h"

namespace backfill::postgres {
namespace {

// PostgreSQL's longest name (NAMEDATALEN - 1): a longer one is cut.
constexpr size_t kMaxName = 63;

std::string SafeJob(const std::string& job_id) {
  std::string out = job_id;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return out;
}

// "bf-<digits>" from the rest of a name after its prefix ("bf_12..."), up
// to `end` (the end of the name, or the '_' before a dataset name).
std::optional<std::string> StoreJobId(std::string_view rest, bool whole) {
  constexpr std::string_view kStoreJob = "bf_";
  if (rest.substr(0, kStoreJob.size()) != kStoreJob) return std::nullopt;
  rest.remove_prefix(kStoreJob.size());
  size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') {
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  if (whole ? digits != rest.size()
            : digits + 1 >= rest.size() || rest[digits] != '_') {
    return std::nullopt;
  }
  return absl::StrCat("bf-", std::string(rest.substr(0, digits)));
}

// The rollback copy's table in _bf: "prev_<job>_<dataset>".
std::string CopyTable(const std::string& job_id, const std::string& dataset) {
  return absl::StrCat("prev_", SafeJob(job_id), "_", dataset);
}

absl::Status CheckName(const std::string& name, const std::string& what) {
  if (name.size() > kMaxName) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " \"", name, "\" is ", name.size(),
        " bytes long; PostgreSQL cuts names after 63 bytes, so it would "
        "name another object: choose a shorter name"));
  }
  return absl::OkStatus();
}

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(std::string(context), ": ",
                                                  status.message()));
}

}  // namespace

std::string PostgresEngine::JobSchema(const std::string& job_id) {
  return absl::StrCat("_bf_", SafeJob(job_id));
}

absl::StatusOr<std::unique_ptr<PostgresEngine>> PostgresEngine::Open(
    const std::string& dsn, int connections) {
  if (connections < 2) {
    return absl::InvalidArgumentError(
        "the PostgreSQL warehouse needs at least 2 connections");
  }
  PgPoolOptions options;
  options.application_name = "backfilld";
  ASSIGN_OR_RETURN(std::unique_ptr<PgPool> pool,
                   PgPool::Open(dsn, connections, options));
  std::string base;
  {
    ASSIGN_OR_RETURN(PgPool::Lease conn, pool->Acquire());
    ASSIGN_OR_RETURN(PgResult schema, conn->Exec("SELECT current_schema()"));
    if (schema.rows.empty() || !schema.rows[0][0]) {
      return absl::FailedPreconditionError(
          "the PostgreSQL warehouse's search_path names no schema that "
          "exists: set search_path (or create the schema) for the dsn's "
          "user");
    }
    base = *schema.rows[0][0];
    if (absl::StartsWith(base, "_bf")) {
      return absl::FailedPreconditionError(
          absl::StrCat("the PostgreSQL warehouse's first schema is ", base,
                       ", a name reserved for backfilld's own schemas"));
    }
    RETURN_IF_ERROR(
        Annotate(CreateServiceSchema(conn.get()), "opening the warehouse"));
    PgTransaction txn(conn.get());
    RETURN_IF_ERROR(txn.Begin());
    RETURN_IF_ERROR(conn->Exec("SELECT pg_advisory_xact_lock($1::bigint)",
                               {std::to_string(kServiceLockKey)})
                        .status());
    for (const std::string& sql : PartitionFunctionSql(kServiceSchema)) {
      RETURN_IF_ERROR(Annotate(conn->Exec(sql).status(),
                               "creating the partition membership functions"));
    }
    RETURN_IF_ERROR(txn.Commit());
  }
  return std::unique_ptr<PostgresEngine>(
      new PostgresEngine(std::move(pool), std::move(base)));
}

PostgresEngine::PostgresEngine(std::unique_ptr<PgPool> pool, std::string base)
    : pool_(std::move(pool)), base_(std::move(base)) {}

PostgresEngine::~PostgresEngine() = default;

std::string PostgresEngine::store_id() const {
  absl::MutexLock lock(&store_mu_);
  return store_id_;
}

void PostgresEngine::Interrupt() { pool_->InterruptAll(); }

absl::StatusOr<WarehouseInfo> PostgresEngine::Inspect() {
  ASSIGN_OR_RETURN(PgPool::Lease conn, pool_->Acquire());
  return ReadWarehouseInfo(conn.get());
}

absl::Status PostgresEngine::Claim(const std::string& store_id,
                                   bool take_over) {
  ASSIGN_OR_RETURN(PgPool::Lease conn, pool_->Acquire());
  RETURN_IF_ERROR(ClaimWarehouse(conn.get(), store_id, take_over));
  absl::MutexLock lock(&store_mu_);
  store_id_ = store_id;
  return absl::OkStatus();
}

absl::StatusOr<bool> PostgresEngine::IsPublished(const std::string& job_id) {
  ASSIGN_OR_RETURN(PgPool::Lease conn, pool_->Acquire());
  return HasPublication(conn.get(), store_id(), job_id);
}

absl::StatusOr<std::vector<std::string>> PostgresEngine::ListJobsWithStaging() {
  ASSIGN_OR_RETURN(PgPool::Lease conn, pool_->Acquire());
  ASSIGN_OR_RETURN(
      PgResult schemas,
      conn->Exec("SELECT nspname FROM pg_namespace WHERE nspname LIKE "
                 "'\\_bf\\_bf\\_%' ORDER BY 1"));
  std::set<std::string> ids;
  for (const std::vector<PgValue>& row : schemas.rows) {
    const std::string name = row[0].value_or("");
    if (std::optional<std::string> id =
            StoreJobId(std::string_view(name).substr(4), /*whole=*/true)) {
      ids.insert(*id);
    }
  }
  return std::vector<std::string>(ids.begin(), ids.end());
}

absl::Status PostgresEngine::DropStaging(const std::string& job_id) {
  ASSIGN_OR_RETURN(PgPool::Lease conn, pool_->Acquire());
  ASSIGN_OR_RETURN(std::string schema,
                   conn->QuoteIdentifier(JobSchema(job_id)));
  return Annotate(
      conn->Exec(absl::StrCat("DROP SCHEMA IF EXISTS ", schema, " CASCADE"))
          .status(),
      absl::StrCat("dropping the staging of job ", job_id));
}

absl::StatusOr<std::vector<RollbackCopy>> PostgresEngine::ListRollbackCopies() {
  ASSIGN_OR_RETURN(PgPool::Lease conn, pool_->Acquire());
  ASSIGN_OR_RETURN(
      PgResult tables,
      conn->Exec("SELECT tablename FROM pg_tables WHERE schemaname = '_bf' "
                 "AND tablename LIKE 'prev\\_bf\\_%'"));
  std::vector<std::pair<std::string, std::string>> copies;
  for (const std::vector<PgValue>& row : tables.rows) {
    const std::string name = row[0].value_or("");
    std::string_view rest = std::string_view(name).substr(5);  // "prev_"
    std::optional<std::string> id = StoreJobId(rest, /*whole=*/false);
    if (!id) continue;
    // "bf_<digits>_" (as long as the id) then the dataset.
    copies.emplace_back(*id, std::string(rest.substr(id->size() + 1)));
  }
  std::sort(copies.begin(), copies.end());
  std::vector<RollbackCopy> out;
  for (auto& [job, dataset] : copies) {
    out.push_back({std::move(job), std::move(dataset)});
  }
  return out;
}

absl::Status PostgresEngine::DropRollbackCopies(
    const std::vector<RollbackCopy>& copies) {
  if (copies.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(PgPool::Lease conn, pool_->Acquire());
  PgTransaction txn(conn.get());
  RETURN_IF_ERROR(txn.Begin());
  for (const RollbackCopy& c : copies) {
    ASSIGN_OR_RETURN(std::string table,
                     conn->QuoteIdentifier(CopyTable(c.job_id, c.dataset)));
    RETURN_IF_ERROR(
        conn->Exec(absl::StrCat("DROP TABLE IF EXISTS _bf.", table)).status());
  }
  return txn.Commit();
}

absl::StatusOr<std::optional<std::vector<ColumnSpec>>>
PostgresEngine::DescribeTable(const DatasetSpec& dataset) {
  RETURN_IF_ERROR(CheckName(dataset.table, "table"));
  ASSIGN_OR_RETURN(PgPool::Lease conn, pool_->Acquire());
  ASSIGN_OR_RETURN(std::string schema, conn->QuoteIdentifier(base_));
  ASSIGN_OR_RETURN(std::string table, conn->QuoteIdentifier(dataset.table));
  ASSIGN_OR_RETURN(std::optional<std::vector<PgColumn>> columns,
                   TableColumns(conn.get(), schema, table));
  if (!columns) return std::nullopt;
  // A column whose type is the contract's, as PostgreSQL names it, is
  // described in the contract's own words ("INT" rather than "integer"),
  // so that the schema check compares like with like.
  std::vector<PgColumn> contract;
  if (!dataset.columns.empty()) {
    absl::StatusOr<std::vector<PgColumn>> normalized =
        NormalizeContract(conn.get(), dataset.columns);
    if (normalized.ok()) contract = *std::move(normalized);
  }
  std::vector<ColumnSpec> out;
  for (const PgColumn& c : *columns) {
    ColumnSpec spec{c.name, c.type};
    for (size_t i = 0; i < contract.size(); ++i) {
      if (contract[i].name == c.name && contract[i].type == c.type) {
        spec.type = dataset.columns[i].type;
      }
    }
    out.push_back(std::move(spec));
  }
  return out;
}

}  // namespace backfill::postgres
