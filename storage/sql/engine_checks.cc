#include "storage/sql/engine_checks.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/model/partition_layout.h"

namespace backfill::sql {

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(std::string(context), ": ",
                                                  status.message()));
}

absl::Status CheckWritable(const Dialect& dialect, const DatasetSpec& ds) {
  if (!ds.is_derived()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset ", ds.name, " is a source; backfills never write it"));
  }
  if (ds.columns.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset ", ds.name, " has no contract columns"));
  }
  for (const ColumnSpec& c : ds.columns) {
    if (absl::Status s = CheckColumnType(c.type); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("dataset ", ds.name, ": column ", c.name,
                       " has an invalid type '", c.type, "': ", s.message()));
    }
  }
  auto declared = [&](const std::string& column) {
    return std::any_of(ds.columns.begin(), ds.columns.end(),
                       [&](const ColumnSpec& c) {
                         return absl::EqualsIgnoreCase(c.name, column);
                       });
  };
  if (ds.partition && !declared(ds.partition->column)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset ", ds.name, ": partition column ",
                     ds.partition->column, " is not a contract column"));
  }
  if (ds.partition && ds.two_dimensional() &&
      !declared(ds.partition->key_column)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset ", ds.name, ": partition key_column ",
                     ds.partition->key_column, " is not a contract column"));
  }
  RETURN_IF_ERROR(dialect.CheckName(ds.table, "table"));
  RETURN_IF_ERROR(dialect.CheckName(dialect.Stage("bf-0", ds.name).name,
                                    "dataset name in"));
  RETURN_IF_ERROR(dialect.CheckName(dialect.Copy("bf-0000000000", ds.name).name,
                                    "dataset name in"));
  return absl::OkStatus();
}

absl::Status CheckItemKeys(const JobLayout::Item& item) {
  if (item.keys.empty()) return absl::OkStatus();
  const DatasetSpec& ds = *item.dataset;
  if (ds.entity_key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset ", ds.name,
                     " declares no entity_key; its rows cannot be "
                     "replaced by key"));
  }
  for (const std::string& key : item.keys) {
    RETURN_IF_ERROR(Annotate(ValidatePartition(Grain::kKey, key),
                             absl::StrCat("dataset ", ds.name, " entity key")));
  }
  return absl::OkStatus();
}

absl::Status CheckPartition(const DatasetSpec& ds,
                            const std::string& partition) {
  return Annotate(
      ValidatePartition(ds.layout(), partition),
      absl::StrCat("dataset ", ds.name, " partition '", partition, "'"));
}

const JobLayout::Item* FindItem(const JobLayout& layout,
                                const std::string& dataset) {
  for (const JobLayout::Item& item : layout.items) {
    if (item.dataset != nullptr && item.dataset->name == dataset) return &item;
  }
  return nullptr;
}

bool IsPinned(const JobLayout& layout, const std::string& dataset) {
  return FindItem(layout, dataset) == nullptr &&
         std::any_of(
             layout.pinned.begin(), layout.pinned.end(),
             [&](const DatasetSpec* p) { return p && p->name == dataset; });
}

std::string ColumnList(const DatasetSpec& ds, std::string_view prefix) {
  if (ds.columns.empty()) return absl::StrCat(std::string(prefix), "*");
  std::vector<std::string> cols;
  for (const ColumnSpec& c : ds.columns) {
    cols.push_back(absl::StrCat(std::string(prefix), Dialect::Quote(c.name)));
  }
  return absl::StrJoin(cols, ", ");
}

}  // namespace backfill::sql
