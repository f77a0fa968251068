#include "storage/sql/dialect.h"

#include <cctype>

#include "absl/strings/str_cat.h"

namespace backfill::sql {

std::string Dialect::Quote(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string Dialect::SafeJob(const std::string& job_id) {
  std::string out = job_id;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return out;
}

std::string Dialect::Name(const Relation& relation) const {
  return absl::StrCat(Quote(relation.schema), ".", Quote(relation.name));
}

Relation Dialect::Copy(const std::string& job_id,
                       const std::string& dataset) const {
  Relation copies = Copies();
  absl::StrAppend(&copies.name, SafeJob(job_id), "_", dataset);
  return copies;
}

absl::Status Dialect::CheckName(const std::string&, const std::string&) const {
  return absl::OkStatus();
}

absl::Status Dialect::CreateJobSpace(Connection*, const std::string&) const {
  return absl::OkStatus();
}

std::string Dialect::TimePlaceholder(int index) const {
  return Placeholder(index);
}

Param Dialect::TimeValue(absl::Time when) const {
  return Param::Int(absl::ToUnixMicros(when));
}

std::string Dialect::BoolPlaceholder(int index) const {
  return Placeholder(index);
}

Param Dialect::BoolValue(bool value) const { return Param::Int(value ? 1 : 0); }

bool Dialect::ReadBool(const Cell& cell) const {
  return cell.text == "1" || cell.text == "t" || cell.text == "true";
}

std::string Dialect::LockingRead(bool) const { return ""; }

std::string Dialect::DropDependents() const { return ""; }

std::string Dialect::TimeType() const { return "INTEGER"; }

std::string Dialect::BoolType() const { return "INTEGER"; }

absl::Status Dialect::ScopeClientSql(Connection*) const {
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Dialect::CatalogTypes(
    Connection*, const DatasetSpec& dataset) const {
  std::vector<std::string> out;
  for (const ColumnSpec& c : dataset.columns) out.push_back(c.type);
  return out;
}

absl::StatusOr<std::vector<std::string>> Dialect::PinStatements(
    Connection*, const Relation& table, const Relation& snapshot) const {
  return std::vector<std::string>{absl::StrCat(
      "CREATE TABLE ", Name(snapshot), " AS SELECT * FROM ", Name(table))};
}

absl::Status Dialect::LockRecords(Connection*) const {
  return absl::OkStatus();
}

std::optional<std::string> Dialect::TypeMismatch(std::string_view,
                                                 const std::string&) const {
  return std::nullopt;
}

}  // namespace backfill::sql
