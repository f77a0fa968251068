#include "core/plan/static_check.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/model/transform_parameters.h"
#include "core/model/upstream_mapping.h"

namespace backfill {
namespace {

std::string At(const DatasetSpec& d, int line) {
  const std::string file = d.file.empty() ? "<unknown file>" : d.file;
  if (line <= 0) line = d.line;
  return absl::StrCat(line > 0 ? absl::StrCat(file, ":", line) : file,
                      ": dataset \"", d.name, "\": ");
}

}  // namespace

absl::StatusOr<std::vector<std::string>> CheckPipelineSql(
    const Catalog& catalog, Engine* engine,
    const std::vector<std::string>& datasets) {
  std::vector<const DatasetSpec*> stand_ins;
  for (const DatasetSpec& d : catalog.datasets()) {
    if (d.is_derived()) stand_ins.push_back(&d);
  }
  const std::set<std::string> wanted(datasets.begin(), datasets.end());
  std::vector<std::string> problems;
  // An engine error that means "does not compile" is a problem to report;
  // anything else stops the check.
  auto describe = [&](const std::string& sql,
                      const DatasetSpec* own) -> absl::StatusOr<QueryShape> {
    return engine->DescribeQuery(sql, stand_ins, own);
  };
  for (const DatasetSpec& d : catalog.datasets()) {
    if (!d.is_derived() || (!wanted.empty() && !wanted.count(d.name))) continue;
    {
      const std::string at = At(d, d.transform_line);
      absl::StatusOr<QueryShape> shape = describe(d.transform, nullptr);
      if (!shape.ok()) {
        if (shape.status().code() != absl::StatusCode::kInvalidArgument) {
          return shape.status();
        }
        problems.push_back(absl::StrCat(
            at, "the transform does not compile: ", shape.status().message()));
      } else {
        if (!shape->read_only) {
          problems.push_back(
              absl::StrCat(at, "the transform is not a read-only SELECT"));
        }
        for (const std::string& p : shape->parameters) {
          if (std::string problem = ParameterProblem(p, ExtraParametersOf(d));
              !problem.empty()) {
            problems.push_back(absl::StrCat(at, problem));
            break;
          }
        }
        std::set<std::string> outputs;
        std::vector<std::string> extra;
        std::set<std::string> contract;
        for (const ColumnSpec& c : d.columns) {
          contract.insert(absl::AsciiStrToLower(c.name));
        }
        for (const std::string& o : shape->columns) {
          const std::string lower = absl::AsciiStrToLower(o);
          if (outputs.insert(lower).second && !contract.count(lower)) {
            extra.push_back(o);
          }
        }
        std::vector<std::string> missing;
        for (const ColumnSpec& c : d.columns) {
          if (!outputs.count(absl::AsciiStrToLower(c.name))) {
            missing.push_back(c.name);
          }
        }
        if (!missing.empty()) {
          problems.push_back(absl::StrCat(
              at, "the transform does not output contract column",
              missing.size() == 1 ? " " : "s ", absl::StrJoin(missing, ", "),
              " (it outputs: ", absl::StrJoin(shape->columns, ", "), ")"));
        }
        if (!extra.empty()) {
          problems.push_back(absl::StrCat(
              at, "the transform outputs column",
              extra.size() == 1 ? " " : "s ", absl::StrJoin(extra, ", "),
              " not in the contract (add it to `contract.columns` or drop it "
              "from the SELECT)"));
        }
      }
    }
    for (const CheckSpec& c : d.checks) {
      const std::string at =
          absl::StrCat(At(d, c.line), "check \"", c.name, "\": ");
      if (c.kind == CheckKind::kAssert) {
        absl::StatusOr<QueryShape> shape = describe(c.sql, &d);
        if (!shape.ok()) {
          if (shape.status().code() != absl::StatusCode::kInvalidArgument) {
            return shape.status();
          }
          problems.push_back(absl::StrCat(
              at,
              "the assertion does not compile: ", shape.status().message()));
          continue;
        }
        if (!shape->read_only) {
          problems.push_back(
              absl::StrCat(at, "the assertion is not a read-only SELECT"));
        }
        for (const std::string& p : shape->parameters) {
          if (std::string problem = ParameterProblem(p, {}, "assertion");
              !problem.empty()) {
            problems.push_back(absl::StrCat(at, problem));
            break;
          }
        }
      } else if (c.kind == CheckKind::kReferences) {
        const DatasetSpec* ref = catalog.Find(c.dataset);
        if (ref == nullptr) continue;  // the catalog refuses this already
        // Identifiers were checked by the catalog; quoted all the same.
        absl::StatusOr<QueryShape> shape = describe(
            absl::StrCat("SELECT \"", c.key, "\" FROM \"", ref->table, "\""),
            nullptr);
        if (!shape.ok()) {
          if (shape.status().code() != absl::StatusCode::kInvalidArgument) {
            return shape.status();
          }
          problems.push_back(absl::StrCat(at, "cannot read ", ref->table, ".",
                                          c.key, ": ",
                                          shape.status().message()));
        }
      }
    }
    for (const ConsumerSpec& c : d.consumers) {
      const std::string at =
          absl::StrCat(At(d, c.expect_line), "consumer \"", c.name, "\": ");
      absl::StatusOr<QueryShape> shape = describe(c.expect, nullptr);
      if (!shape.ok()) {
        if (shape.status().code() != absl::StatusCode::kInvalidArgument) {
          return shape.status();
        }
        problems.push_back(absl::StrCat(
            at,
            "the expect query does not compile: ", shape.status().message()));
        continue;
      }
      if (!shape->read_only) {
        problems.push_back(
            absl::StrCat(at, "the expect query is not a read-only SELECT"));
      }
      if (shape->columns.empty()) {
        problems.push_back(
            absl::StrCat(at, "the expect query returns no column"));
      }
      ExtraParameters extra;
      extra.partition_key = d.two_dimensional();
      for (const std::string& p : shape->parameters) {
        if (std::string problem = ParameterProblem(p, extra, "expect query");
            !problem.empty()) {
          problems.push_back(absl::StrCat(at, problem));
          break;
        }
      }
    }
  }
  return problems;
}

}  // namespace backfill
