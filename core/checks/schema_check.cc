#include "core/checks/schema_check.h"

#include <optional>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace backfill {
namespace {

std::string Lower(const std::string& s) { return absl::AsciiStrToLower(s); }

// Types compared ignoring letter case and spaces: "numeric(10, 2)" is
// "NUMERIC(10,2)".
std::string NormalType(const std::string& type) {
  std::string out;
  for (char ch : absl::AsciiStrToUpper(type)) {
    if (ch != ' ' && ch != '\t') out.push_back(ch);
  }
  return out;
}

std::string Quoted(const std::vector<std::string>& names) {
  std::vector<std::string> q;
  for (const std::string& n : names) q.push_back(absl::StrCat("\"", n, "\""));
  return absl::StrJoin(q, ", ");
}

// "extra column "x"; missing contract column "y"" with a rename guess.
std::vector<std::string> Differences(const std::vector<std::string>& missing,
                                     const std::vector<std::string>& extra,
                                     const std::string& where) {
  std::vector<std::string> out;
  if (missing.size() == 1 && extra.size() == 1) {
    out.push_back(absl::StrCat(where, " has column \"", extra[0],
                               "\" instead of contract column \"", missing[0],
                               "\" (renamed?)"));
    return out;
  }
  if (!extra.empty()) {
    out.push_back(absl::StrCat(where, " has ",
                               extra.size() == 1 ? "a column" : "columns",
                               " not in the contract: ", Quoted(extra)));
  }
  if (!missing.empty()) {
    out.push_back(absl::StrCat(where, " lacks contract ",
                               missing.size() == 1 ? "column " : "columns ",
                               Quoted(missing)));
  }
  return out;
}

}  // namespace

void SchemaCheck::Require(ProfileRequest* request) { request->types = true; }

absl::StatusOr<std::vector<CheckResult>> SchemaCheck::Run(
    const CheckContext& c) {
  const DatasetSpec& ds = *c.dataset;
  ResultBuilder out("schema", "schema", CheckSeverity::kError, ds.name,
                    "exactly the contract's columns and types");
  std::set<std::string> contract;
  for (const ColumnSpec& col : ds.columns) contract.insert(Lower(col.name));

  // The transform's output columns.
  std::vector<const DatasetSpec*> stand_ins;
  for (const JobLayout::Item& item : c.layout->items) {
    stand_ins.push_back(item.dataset);
  }
  for (const DatasetSpec* pin : c.layout->pinned) stand_ins.push_back(pin);
  absl::StatusOr<QueryShape> shape =
      c.engine->DescribeQuery(ds.transform, stand_ins, nullptr);
  if (!shape.ok()) {
    if (shape.status().code() != absl::StatusCode::kInvalidArgument) {
      return shape.status();
    }
    out.Whole(false, "the transform does not compile",
              absl::StrCat("the transform does not compile: ",
                           shape.status().message()));
  } else {
    std::vector<std::string> extra;
    std::set<std::string> outputs;
    for (const std::string& o : shape->columns) {
      if (!outputs.insert(Lower(o)).second) continue;
      if (!contract.count(Lower(o))) extra.push_back(o);
    }
    std::vector<std::string> missing;
    for (const ColumnSpec& col : ds.columns) {
      if (!outputs.count(Lower(col.name))) missing.push_back(col.name);
    }
    std::vector<std::string> diff =
        Differences(missing, extra, "the transform's output");
    out.Whole(diff.empty(),
              diff.empty() ? absl::StrCat(shape->columns.size(),
                                          " output columns match the contract")
                           : absl::StrJoin(diff, "; "),
              diff.empty() ? "the transform outputs the contract's columns"
                           : absl::StrJoin(diff, "; "));
  }

  // The published table, once it exists.
  absl::StatusOr<std::optional<std::vector<ColumnSpec>>> table =
      c.engine->DescribeTable(ds);
  if (!table.ok()) return table.status();
  if (table->has_value()) {
    std::vector<std::string> extra;
    std::vector<std::string> retyped;
    std::set<std::string> present;
    for (const ColumnSpec& col : **table) {
      present.insert(Lower(col.name));
      bool found = false;
      for (const ColumnSpec& want : ds.columns) {
        if (Lower(want.name) != Lower(col.name)) continue;
        found = true;
        if (NormalType(want.type) != NormalType(col.type)) {
          retyped.push_back(absl::StrCat(
              "\"", col.name, "\" is ", col.type.empty() ? "untyped" : col.type,
              ", the contract says ", want.type));
        }
      }
      if (!found) extra.push_back(col.name);
    }
    std::vector<std::string> missing;
    for (const ColumnSpec& col : ds.columns) {
      if (!present.count(Lower(col.name))) missing.push_back(col.name);
    }
    std::vector<std::string> diff = Differences(
        missing, extra, absl::StrCat("the published table ", ds.table));
    if (!retyped.empty()) {
      diff.push_back(absl::StrCat("in the published table ", ds.table, ", ",
                                  absl::StrJoin(retyped, "; ")));
    }
    out.Whole(diff.empty(),
              diff.empty() ? "the published table matches the contract"
                           : absl::StrJoin(diff, "; "),
              diff.empty() ? absl::StrCat("the published table ", ds.table,
                                          " matches the contract")
                           : absl::StrJoin(diff, "; "));
  }

  // The staged values' types, per partition.
  for (const std::string& partition : c.partitions) {
    auto s = c.staged->find(partition);
    if (s == c.staged->end() || s->second.type_mismatches().empty()) {
      out.Pass();
      continue;
    }
    std::vector<std::string> found;
    std::vector<std::string> samples;
    for (const auto& [column, mismatch] : s->second.type_mismatches()) {
      std::string declared;
      for (const ColumnSpec& col : ds.columns) {
        if (col.name == column) declared = col.type;
      }
      found.push_back(absl::StrCat(RowsText(mismatch.count), " with a ", column,
                                   " value that is not ", declared));
      for (const std::string& row : mismatch.samples) {
        if (samples.size() < static_cast<size_t>(kMaxSampleRows)) {
          samples.push_back(row);
        }
      }
    }
    const std::string observed = absl::StrJoin(found, ", ");
    out.Fail(partition, observed,
             absl::StrCat("the transform produced ", observed,
                          " (a retyped column?)"),
             samples);
  }
  return out.Finish();
}

}  // namespace backfill
