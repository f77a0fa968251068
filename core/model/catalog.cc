#include "core/model/catalog.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"
#include "core/model/identifier.h"
#include "core/model/partition.h"
#include "core/model/partition_mapping.h"
#include "core/model/transform_sql.h"

namespace backfill {

absl::Status ValidateDatasetPartition(const DatasetSpec& ds,
                                      const std::string& partition) {
  RETURN_IF_ERROR(ValidatePartition(ds.layout(), partition));
  if (ds.grain() == Grain::kKey &&
      std::find(ds.partition->keys.begin(), ds.partition->keys.end(),
                partition) == ds.partition->keys.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", partition, "\" is not a key of dataset \"", ds.name,
        "\"; declared keys: ", absl::StrJoin(ds.partition->keys, ", ")));
  }
  return absl::OkStatus();
}
namespace {

// Words that start a column constraint (or belong to one) in SQLite's
// CREATE TABLE. A "type" containing one would smuggle a constraint into the
// DDL (INTEGER PRIMARY KEY, TEXT COLLATE NOCASE, ... GENERATED ALWAYS AS).
constexpr std::string_view kConstraintWords[] = {
    "PRIMARY", "KEY",        "NOT",          "NULL",       "UNIQUE",
    "CHECK",   "DEFAULT",    "COLLATE",      "REFERENCES", "GENERATED",
    "AS",      "CONSTRAINT", "AUTOINCREMENT"};

bool IsConstraintWord(std::string_view word) {
  for (std::string_view k : kConstraintWords) {
    if (absl::EqualsIgnoreCase(Sv(word), Sv(k))) return true;
  }
  return false;
}

bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() &&
         absl::EqualsIgnoreCase(Sv(s.substr(0, prefix.size())), Sv(prefix));
}

// Names reserved for the engine's own tables ("_bf_") and for SQLite's
// ("sqlite_"), in any letter case; empty if `name` is not reserved.
std::string_view ReservedPrefix(std::string_view name) {
  for (std::string_view prefix : {"_bf_", "sqlite_"}) {
    if (StartsWithIgnoreCase(name, prefix)) return prefix;
  }
  return "";
}

}  // namespace

absl::Status CheckColumnType(std::string_view type) {
  const absl::Status bad = absl::InvalidArgumentError(
      "expected a SQL type name of one or two words, optionally followed "
      "by (N) or (N, M), such as TEXT, INTEGER, REAL, DOUBLE PRECISION, "
      "VARCHAR(32) or NUMERIC(10, 2)");
  if (type.empty() || type.size() > 64) return bad;
  size_t i = 0;
  auto alpha = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  auto digits = [&]() {
    size_t start = i;
    while (i < type.size() && digit(type[i])) ++i;
    return i > start;
  };
  auto spaces = [&]() {
    while (i < type.size() && type[i] == ' ') ++i;
  };
  // One or two words [A-Za-z_][A-Za-z0-9_]*, separated by one space.
  std::vector<std::string_view> words;
  while (i < type.size() && alpha(type[i])) {
    const size_t start = i;
    while (i < type.size() && (alpha(type[i]) || digit(type[i]))) ++i;
    words.push_back(type.substr(start, i - start));
    if (i + 1 < type.size() && type[i] == ' ' && alpha(type[i + 1])) ++i;
  }
  for (std::string_view w : words) {
    if (IsConstraintWord(w)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", Sv(w),
          "\" is a constraint keyword; a type is only a type name (no "
          "PRIMARY KEY, NOT NULL, UNIQUE, CHECK, DEFAULT, COLLATE, "
          "REFERENCES or GENERATED; declare the key with `primary_key:`)"));
    }
  }
  if (words.empty() || words.size() > 2) return bad;
  if (i == type.size()) return absl::OkStatus();
  // "(N)" or "(N, M)".
  spaces();
  if (i >= type.size() || type[i] != '(') return bad;
  ++i;
  spaces();
  if (!digits()) return bad;
  spaces();
  if (i < type.size() && type[i] == ',') {
    ++i;
    spaces();
    if (!digits()) return bad;
    spaces();
  }
  if (i >= type.size() || type[i] != ')') return bad;
  ++i;
  return i == type.size() ? absl::OkStatus() : bad;
}

namespace {

// SQLite's numeric type affinities (INTEGER, REAL, NUMERIC/DECIMAL): a type
// name containing INT, REAL, FLOA, DOUB, NUMERIC or DECIMAL.
bool IsNumericType(std::string_view type) {
  const std::string upper =
      absl::AsciiStrToUpper(absl::string_view(type.data(), type.size()));
  for (const char* word :
       {"INT", "REAL", "FLOA", "DOUB", "NUMERIC", "DECIMAL"}) {
    if (upper.find(word) != std::string::npos) return true;
  }
  return false;
}

std::string Where(const DatasetSpec& d) {
  std::string file = d.file.empty() ? "<unknown file>" : d.file;
  return d.line > 0 ? absl::StrCat(file, ":", d.line) : file;
}

absl::Status DatasetError(const DatasetSpec& d, absl::string_view reason) {
  return absl::InvalidArgumentError(
      absl::StrCat(Where(d), ": dataset \"", d.name, "\": ", reason));
}

absl::Status CheckError(const DatasetSpec& d, const CheckSpec& c,
                        absl::string_view reason) {
  std::string file = d.file.empty() ? "<unknown file>" : d.file;
  const int line = c.line > 0 ? c.line : d.line;
  return absl::InvalidArgumentError(absl::StrCat(
      line > 0 ? absl::StrCat(file, ":", line) : file, ": dataset \"", d.name,
      "\": check \"", c.name, "\" (", CheckKindName(c.kind), "): ", reason));
}

// The declaration as the API lists it, in YAML flow style.
std::string CheckText(const CheckSpec& c) {
  std::vector<std::string> parts = {
      absl::StrCat("kind: ", CheckKindName(c.kind))};
  if (c.kind == CheckKind::kAssert) parts.push_back("name: " + c.name);
  if (!c.column.empty()) parts.push_back("column: " + c.column);
  if (!c.columns.empty()) {
    parts.push_back(
        absl::StrCat("columns: [", absl::StrJoin(c.columns, ", "), "]"));
  }
  if (!c.dataset.empty()) parts.push_back("dataset: " + c.dataset);
  if (!c.key.empty()) parts.push_back("key: " + c.key);
  if (c.kind == CheckKind::kReferences) {
    parts.push_back(absl::StrCat("max_orphans: ", c.max_orphans));
  }
  if (c.kind == CheckKind::kMinRows) {
    parts.push_back(absl::StrCat("min: ", c.min));
  }
  if (!c.max_change_text.empty()) {
    parts.push_back("max_change: " + c.max_change_text);
  }
  if (c.kind == CheckKind::kAssert) parts.push_back("sql: " + c.sql);
  parts.push_back(absl::StrCat("severity: ", CheckSeverityName(c.severity)));
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

// Checks the dataset's declared checks against its own contract; fills in
// default names and the text. References to other datasets are checked in
// Build.
absl::Status ValidateChecks(
    DatasetSpec& d, const std::function<bool(const std::string&)>& is_column) {
  std::map<std::string, int> names;
  for (CheckSpec& c : d.checks) {
    if (c.name.empty()) {
      switch (c.kind) {
        case CheckKind::kMeasureChange:
        case CheckKind::kReferences:
          c.name = absl::StrCat(CheckKindName(c.kind), "(", c.column, ")");
          break;
        case CheckKind::kNotNull:
          c.name = absl::StrCat(CheckKindName(c.kind), "(",
                                absl::StrJoin(c.columns, ", "), ")");
          break;
        default:
          c.name = CheckKindName(c.kind);
      }
    }
    if (!d.is_derived()) {
      return CheckError(d, c,
                        "checks are only allowed on derived datasets (a "
                        "source is never staged)");
    }
    auto [it, inserted] = names.emplace(c.name, c.line);
    if (!inserted) {
      return CheckError(
          d, c,
          absl::StrCat("a check of this name is already declared at line ",
                       it->second, "; give one of them a different `name:`"));
    }
    std::vector<std::string> columns = c.columns;
    if (!c.column.empty()) columns.push_back(c.column);
    std::set<std::string> seen;
    for (const std::string& col : columns) {
      if (!is_column(col)) {
        return CheckError(
            d, c,
            absl::StrCat("column \"", col,
                         "\" is not a contract column of the dataset"));
      }
      if (!seen.insert(col).second) {
        return CheckError(d, c,
                          absl::StrCat("column \"", col, "\" is listed twice"));
      }
    }
    if (c.kind == CheckKind::kMeasureChange) {
      for (const ColumnSpec& col : d.columns) {
        if (col.name == c.column && !IsNumericType(col.type)) {
          return CheckError(
              d, c,
              absl::StrCat("column \"", c.column, "\" has type ", col.type,
                           ", which is not numeric; measure_change sums a "
                           "column of a numeric type (INTEGER, REAL, "
                           "NUMERIC, DECIMAL, ...)"));
        }
      }
    }
    if (c.kind == CheckKind::kReferences && c.dataset == d.name) {
      return CheckError(d, c,
                        "a dataset cannot reference itself; name another "
                        "dataset in `dataset:`");
    }
    c.text = CheckText(c);
  }
  return absl::OkStatus();
}

// "`what` "name" starts with the reserved prefix ..." or OK.
absl::Status CheckNotReserved(const DatasetSpec& d, std::string_view what,
                              std::string_view name) {
  std::string_view prefix = ReservedPrefix(name);
  if (prefix.empty()) return absl::OkStatus();
  return DatasetError(
      d, absl::StrCat(Sv(what), " \"", Sv(name),
                      "\" starts with the reserved prefix \"", Sv(prefix),
                      "\" (in any letter case; \"_bf_\" is reserved for "
                      "the engine's tables, \"sqlite_\" for SQLite's)"));
}

// Checks the key dimension of a time x key dataset `d` (its time grain and
// column are checked as for any partition): an identifier, not reserved, a
// contract column (derived) other than the time column, and declared keys
// that are unique, valid keys and free of '|'.
template <typename IsColumn>
absl::Status CheckTimeKeyPartition(const DatasetSpec& d,
                                   const IsColumn& is_column) {
  const PartitionSpec& p = *d.partition;
  if (!IsTimeGrain(p.grain)) {
    return DatasetError(d, absl::StrCat("`key_column:` needs a time grain "
                                        "(hour, day or month), not ",
                                        GrainName(p.grain)));
  }
  if (!IsIdentifier(p.key_column)) {
    return DatasetError(d, absl::StrCat("partition key_column \"", p.key_column,
                                        "\" must be an identifier "
                                        "([A-Za-z_][A-Za-z0-9_]*)"));
  }
  RETURN_IF_ERROR(CheckNotReserved(d, "partition key_column", p.key_column));
  if (absl::EqualsIgnoreCase(p.key_column, p.column)) {
    return DatasetError(
        d, absl::StrCat("partition key_column \"", p.key_column,
                        "\" is the time column too; a time x key partition "
                        "needs two different columns"));
  }
  if (d.is_derived() && !is_column(p.key_column)) {
    return DatasetError(d, absl::StrCat("partition key_column \"", p.key_column,
                                        "\" is not a contract column"));
  }
  if (p.keys.empty()) {
    return DatasetError(d, "`key_column:` needs a non-empty `keys:` list");
  }
  std::set<std::string, std::less<>> seen;
  for (const std::string& key : p.keys) {
    absl::Status s = ValidateDimensionKey(key);
    if (!s.ok()) return DatasetError(d, absl::StrCat("key: ", s.message()));
    if (!seen.insert(key).second) {
      return DatasetError(d, absl::StrCat("key \"", key, "\" is listed twice"));
    }
  }
  return absl::OkStatus();
}

// Checks the key dimension of an identity, rollup or lookback edge of `d`
// to `u` (their time grains are checked elsewhere): when both are time x
// key, a partition T|K of `d` reads K of `u`, so every key of `d` must be a
// key of `u`. A one-dimensional side needs no check (a time upstream is
// read by every key; a time dependent reads every key).
absl::Status CheckKeyDimensionEdge(const DatasetSpec& d, const UpstreamEdge& e,
                                   const DatasetSpec& u) {
  if (!d.two_dimensional() || !u.two_dimensional()) return absl::OkStatus();
  std::vector<std::string> missing;
  for (const std::string& k : d.partition->keys) {
    if (std::find(u.partition->keys.begin(), u.partition->keys.end(), k) ==
        u.partition->keys.end()) {
      missing.push_back(k);
    }
  }
  if (missing.empty()) return absl::OkStatus();
  return DatasetError(
      d, absl::StrCat("mapping ", MappingName(e.mapping), " to upstream \"",
                      u.name, "\": key(s) ", absl::StrJoin(missing, ", "),
                      " of ", d.name, " are not keys of ", u.name,
                      " (declared: ", absl::StrJoin(u.partition->keys, ", "),
                      "); a time x key dataset reads the same key of a time x "
                      "key upstream, so its keys must be among the "
                      "upstream's"));
}

// Checks one dataset on its own (everything that does not need the others).
absl::Status ValidateOne(DatasetSpec& d) {
  if (!IsIdentifier(d.name)) {
    return DatasetError(d,
                        "name must be an identifier ([A-Za-z_][A-Za-z0-9_]*, "
                        "at most 128 characters)");
  }
  RETURN_IF_ERROR(CheckNotReserved(d, "name", d.name));
  if (d.table.empty()) d.table = d.name;
  if (!IsIdentifier(d.table)) {
    return DatasetError(d, absl::StrCat("table \"", d.table,
                                        "\" must be an identifier "
                                        "([A-Za-z_][A-Za-z0-9_]*)"));
  }
  RETURN_IF_ERROR(CheckNotReserved(d, "table", d.table));

  // Contract column names by lower-cased name: SQLite identifiers are
  // case-insensitive, even quoted.
  std::map<std::string, std::string> columns;
  for (const ColumnSpec& c : d.columns) {
    if (!IsIdentifier(c.name)) {
      return DatasetError(d, absl::StrCat("contract column \"", c.name,
                                          "\" must be an identifier "
                                          "([A-Za-z_][A-Za-z0-9_]*)"));
    }
    RETURN_IF_ERROR(CheckNotReserved(d, "contract column", c.name));
    auto [it, inserted] =
        columns.emplace(absl::AsciiStrToLower(c.name), c.name);
    if (!inserted) {
      return DatasetError(
          d, it->second == c.name
                 ? absl::StrCat("contract column \"", c.name,
                                "\" is declared twice")
                 : absl::StrCat("contract column \"", c.name,
                                "\" is declared twice (as \"", it->second,
                                "\"; column names are case-insensitive)"));
    }
    absl::Status type = CheckColumnType(c.type);
    if (!type.ok()) {
      return DatasetError(
          d, absl::StrCat("contract column \"", c.name, "\" has type \"",
                          c.type, "\": ", type.message()));
    }
  }
  auto is_column = [&](const std::string& name) {
    auto it = columns.find(absl::AsciiStrToLower(name));
    return it != columns.end() && it->second == name;
  };
  std::set<std::string, std::less<>> pk;
  for (const std::string& k : d.primary_key) {
    if (!is_column(k)) {
      return DatasetError(d, absl::StrCat("primary_key column \"", k,
                                          "\" is not a contract column"));
    }
    if (!pk.insert(k).second) {
      return DatasetError(
          d, absl::StrCat("primary_key column \"", k, "\" is listed twice"));
    }
  }

  if (d.partition) {
    const PartitionSpec& p = *d.partition;
    if (p.grain == Grain::kNone) {
      return DatasetError(d,
                          "partition needs a grain: hour, day, month or key");
    }
    if (!IsIdentifier(p.column)) {
      return DatasetError(d, absl::StrCat("partition column \"", p.column,
                                          "\" must be an identifier "
                                          "([A-Za-z_][A-Za-z0-9_]*)"));
    }
    RETURN_IF_ERROR(CheckNotReserved(d, "partition column", p.column));
    if (p.two_dimensional()) {
      RETURN_IF_ERROR(CheckTimeKeyPartition(d, is_column));
    } else if (p.grain == Grain::kKey) {
      if (p.keys.empty()) {
        return DatasetError(d, "grain key needs a non-empty `keys:` list");
      }
      std::set<std::string, std::less<>> seen;
      for (const std::string& key : p.keys) {
        absl::Status s = ValidatePartition(Grain::kKey, key);
        if (!s.ok()) {
          return DatasetError(d, absl::StrCat("key: ", s.message()));
        }
        if (!seen.insert(key).second) {
          return DatasetError(
              d, absl::StrCat("key \"", key, "\" is listed twice"));
        }
      }
    } else if (!p.keys.empty()) {
      return DatasetError(d, absl::StrCat("`keys:` is only allowed with grain "
                                          "key (or a time grain with a "
                                          "`key_column:`), not ",
                                          GrainName(p.grain)));
    }
    if (d.is_derived() && !is_column(p.column)) {
      return DatasetError(d, absl::StrCat("partition column \"", p.column,
                                          "\" is not a contract column"));
    }
  }

  if (d.is_derived()) {
    if (d.transform.empty()) {
      return DatasetError(d, "a derived dataset needs a `transform:`");
    }
    absl::StatusOr<std::string> sql =
        CanonicalTransform(d.transform, ExtraParametersOf(d));
    if (!sql.ok()) return DatasetError(d, sql.status().message());
    d.transform = *std::move(sql);
    if (d.transform_version.empty()) {
      d.transform_version = TransformVersion(d.transform);
    }
    if (d.columns.empty()) {
      return DatasetError(
          d, "a derived dataset needs `contract: {columns: ...}` (non-empty)");
    }
  } else {
    if (!d.upstream.empty()) {
      return DatasetError(d, "a source dataset cannot have `upstream:`");
    }
    if (!d.transform.empty()) {
      return DatasetError(d, "a source dataset cannot have a `transform:`");
    }
  }

  RETURN_IF_ERROR(ValidateChecks(d, is_column));

  std::set<std::string, std::less<>> ups;
  for (const UpstreamEdge& e : d.upstream) {
    if (!ups.insert(e.dataset).second) {
      return DatasetError(
          d, absl::StrCat("upstream \"", e.dataset, "\" is listed twice"));
    }
  }
  return absl::OkStatus();
}

// Checks a rollup or lookback edge of `d` to the upstream `u`: a rollup
// reads a strictly finer time grain, a lookback the same time grain, with
// 1 <= N <= kMaxLookback.
absl::Status CheckWindowEdge(const DatasetSpec& d, const UpstreamEdge& e,
                             const DatasetSpec& u) {
  auto grain = [](const DatasetSpec& x) -> std::string {
    return x.partition ? GrainName(x.grain()) : "unpartitioned";
  };
  if (e.mapping == Mapping::kRollup) {
    if (e.lookback != 0) {
      return DatasetError(d, absl::StrCat("upstream \"", u.name,
                                          "\" has a lookback with mapping "
                                          "rollup; give one or the other"));
    }
    if (!ValidateRollup(u.grain(), d.grain()).ok()) {
      return DatasetError(
          d, absl::StrCat("mapping rollup to upstream \"", u.name,
                          "\" needs a strictly finer time grain upstream "
                          "(hour -> day, day -> month or hour -> month), but ",
                          u.name, " is ", grain(u), " and ", d.name, " is ",
                          grain(d)));
    }
    return absl::OkStatus();
  }
  if (!IsTimeGrain(d.grain()) || d.grain() != u.grain()) {
    return DatasetError(
        d, absl::StrCat("mapping lookback to upstream \"", u.name,
                        "\" needs both datasets partitioned by the same time "
                        "grain (hour, day or month), but ",
                        d.name, " is ", grain(d), " and ", u.name, " is ",
                        grain(u),
                        IsTimeGrain(d.grain()) && IsTimeGrain(u.grain()) &&
                                d.grain() != u.grain()
                            ? "; a finer upstream is read with `mapping: "
                              "rollup`"
                            : ""));
  }
  if (e.lookback < 1 || e.lookback > kMaxLookback) {
    return DatasetError(
        d, absl::StrCat("lookback ", e.lookback, " to upstream \"", u.name,
                        "\" is out of range; it must be 1 to ", kMaxLookback,
                        " ", GrainName(d.grain()), " partitions"));
  }
  return absl::OkStatus();
}

// Finds a cycle among the upstream edges; returns it as "a -> b -> a"
// (dependent -> upstream) or "" when there is none.
std::string FindCycle(const std::vector<DatasetSpec>& datasets,
                      const std::map<std::string, size_t, std::less<>>& index) {
  enum Color { kWhite, kGrey, kBlack };
  std::vector<Color> color(datasets.size(), kWhite);
  std::vector<size_t> stack;
  std::string cycle;

  // Iterative DFS would be longer; pipelines are small, recursion is fine.
  auto visit = [&](auto& self, size_t i) -> bool {
    color[i] = kGrey;
    stack.push_back(i);
    std::vector<std::string> ups;
    for (const UpstreamEdge& e : datasets[i].upstream) ups.push_back(e.dataset);
    std::sort(ups.begin(), ups.end());
    for (const std::string& u : ups) {
      auto it = index.find(u);
      if (it == index.end()) continue;
      size_t j = it->second;
      if (color[j] == kGrey) {
        auto from = std::find(stack.begin(), stack.end(), j);
        std::vector<std::string> names;
        for (auto k = from; k != stack.end(); ++k) {
          names.push_back(datasets[*k].name);
        }
        names.push_back(datasets[j].name);
        cycle = absl::StrJoin(names, " -> ");
        return true;
      }
      if (color[j] == kWhite && self(self, j)) return true;
    }
    stack.pop_back();
    color[i] = kBlack;
    return false;
  };
  for (const auto& [name, i] : index) {
    if (color[i] == kWhite && visit(visit, i)) return cycle;
  }
  return "";
}

}  // namespace

const char* CheckKindName(CheckKind kind) {
  switch (kind) {
    case CheckKind::kRowChange:
      return "row_change";
    case CheckKind::kMinRows:
      return "min_rows";
    case CheckKind::kMeasureChange:
      return "measure_change";
    case CheckKind::kReferences:
      return "references";
    case CheckKind::kNotNull:
      return "not_null";
    case CheckKind::kAssert:
      return "assert";
  }
  return "row_change";
}

absl::StatusOr<CheckKind> ParseCheckKind(std::string_view name) {
  for (CheckKind k :
       {CheckKind::kRowChange, CheckKind::kMinRows, CheckKind::kMeasureChange,
        CheckKind::kReferences, CheckKind::kNotNull, CheckKind::kAssert}) {
    if (name == CheckKindName(k)) return k;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "check kind \"", Sv(name),
      "\" is not valid; expected row_change, min_rows, measure_change, "
      "references, not_null or assert"));
}

const char* DatasetKindName(DatasetKind kind) {
  return kind == DatasetKind::kDerived ? "derived" : "source";
}

const char* MappingName(Mapping mapping) {
  switch (mapping) {
    case Mapping::kAll:
      return "all";
    case Mapping::kRollup:
      return "rollup";
    case Mapping::kLookback:
      return "lookback";
    case Mapping::kIdentity:
      break;
  }
  return "identity";
}

absl::StatusOr<Catalog> Catalog::Build(std::vector<DatasetSpec> datasets,
                                       WarehouseSpec warehouse) {
  std::map<std::string, size_t, std::less<>> index;
  // Dataset and table names, lower-cased: SQLite identifiers are
  // case-insensitive even quoted, so "RAW_ORDERS" is the table "raw_orders"
  // (and a dataset name is part of its staging tables' names).
  std::map<std::string, size_t> names;
  std::map<std::string, size_t> tables;
  for (size_t i = 0; i < datasets.size(); ++i) {
    DatasetSpec& d = datasets[i];
    absl::Status s = ValidateOne(d);
    if (!s.ok()) return s;
    auto [nit, ninserted] = names.emplace(absl::AsciiStrToLower(d.name), i);
    if (!ninserted) {
      const DatasetSpec& other = datasets[nit->second];
      return DatasetError(
          d, other.name == d.name
                 ? absl::StrCat("is already declared at ", Where(other))
                 : absl::StrCat("is already declared at ", Where(other),
                                " as \"", other.name,
                                "\" (dataset names are case-insensitive)"));
    }
    index.emplace(d.name, i);
    auto [tit, tinserted] = tables.emplace(absl::AsciiStrToLower(d.table), i);
    if (!tinserted) {
      const DatasetSpec& other = datasets[tit->second];
      return DatasetError(
          d, absl::StrCat(
                 "table \"", d.table, "\" is already used by dataset \"",
                 other.name, "\" at ", Where(other),
                 other.table == d.table ? ""
                                        : absl::StrCat(" as \"", other.table,
                                                       "\" (table names are "
                                                       "case-insensitive)")));
    }
  }

  for (const DatasetSpec& d : datasets) {
    for (const UpstreamEdge& e : d.upstream) {
      auto it = index.find(e.dataset);
      if (it == index.end()) {
        return DatasetError(d, absl::StrCat("upstream \"", e.dataset,
                                            "\" is not a declared dataset"));
      }
      const DatasetSpec& u = datasets[it->second];
      if (e.mapping == Mapping::kRollup || e.mapping == Mapping::kLookback) {
        RETURN_IF_ERROR(CheckWindowEdge(d, e, u));
        RETURN_IF_ERROR(CheckKeyDimensionEdge(d, e, u));
        continue;
      }
      if (e.lookback != 0) {
        return DatasetError(
            d, absl::StrCat("upstream \"", u.name, "\" has a lookback of ",
                            e.lookback, " but mapping ", MappingName(e.mapping),
                            "; a lookback needs `mapping: {lookback: N}`"));
      }
      if (e.mapping != Mapping::kIdentity) continue;
      if (!d.partition || !u.partition) {
        return DatasetError(
            d, absl::StrCat("mapping identity to upstream \"", u.name,
                            "\" needs both datasets partitioned (", d.name,
                            ": ", d.partition ? GrainName(d.grain()) : "none",
                            ", ", u.name, ": ",
                            u.partition ? GrainName(u.grain()) : "none",
                            "); use `mapping: all` for an unpartitioned "
                            "upstream"));
      }
      if (d.grain() != u.grain()) {
        return DatasetError(
            d, absl::StrCat("mapping identity to upstream \"", u.name,
                            "\" needs the same grain, but ", d.name, " is ",
                            GrainName(d.grain()), " and ", u.name, " is ",
                            GrainName(u.grain())));
      }
      RETURN_IF_ERROR(CheckKeyDimensionEdge(d, e, u));
    }
  }

  for (const DatasetSpec& d : datasets) {
    for (const CheckSpec& c : d.checks) {
      if (c.kind != CheckKind::kReferences) continue;
      auto it = index.find(c.dataset);
      if (it == index.end()) {
        return CheckError(d, c,
                          absl::StrCat("dataset \"", c.dataset,
                                       "\" is not a declared dataset"));
      }
      const DatasetSpec& ref = datasets[it->second];
      if (ref.columns.empty()) {
        if (!IsIdentifier(c.key)) {
          return CheckError(
              d, c, absl::StrCat("key \"", c.key, "\" must be an identifier"));
        }
        continue;  // a source without a contract: checked against the
                   // warehouse when transforms are checked
      }
      bool found = false;
      for (const ColumnSpec& col : ref.columns) found |= col.name == c.key;
      if (!found) {
        return CheckError(
            d, c,
            absl::StrCat("key \"", c.key,
                         "\" is not a contract column of dataset \"", ref.name,
                         "\""));
      }
    }
  }

  std::string cycle = FindCycle(datasets, index);
  if (!cycle.empty()) {
    const DatasetSpec& d =
        datasets[index.find(cycle.substr(0, cycle.find(' ')))->second];
    return DatasetError(d, absl::StrCat("upstream cycle: ", cycle));
  }

  // Kahn's algorithm; the ready set is ordered by name.
  std::vector<int> pending(datasets.size(), 0);
  std::vector<std::vector<size_t>> dependents(datasets.size());
  for (size_t i = 0; i < datasets.size(); ++i) {
    for (const UpstreamEdge& e : datasets[i].upstream) {
      dependents[index.find(e.dataset)->second].push_back(i);
      ++pending[i];
    }
  }
  std::set<std::pair<std::string, size_t>> ready;
  for (size_t i = 0; i < datasets.size(); ++i) {
    if (pending[i] == 0) ready.emplace(datasets[i].name, i);
  }
  std::vector<DatasetSpec> sorted;
  sorted.reserve(datasets.size());
  while (!ready.empty()) {
    size_t i = ready.begin()->second;
    ready.erase(ready.begin());
    for (size_t j : dependents[i]) {
      if (--pending[j] == 0) ready.emplace(datasets[j].name, j);
    }
    sorted.push_back(std::move(datasets[i]));
  }

  Catalog catalog;
  catalog.datasets_ = std::move(sorted);
  for (size_t i = 0; i < catalog.datasets_.size(); ++i) {
    catalog.index_.emplace(catalog.datasets_[i].name, i);
  }
  catalog.warehouse_ = std::move(warehouse);
  return catalog;
}

const DatasetSpec* Catalog::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &datasets_[it->second];
}

std::vector<const DatasetSpec*> Catalog::DirectDependents(
    std::string_view name) const {
  std::vector<const DatasetSpec*> out;
  for (const DatasetSpec& d : datasets_) {
    for (const UpstreamEdge& e : d.upstream) {
      if (e.dataset == name) {
        out.push_back(&d);
        break;
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const DatasetSpec* a, const DatasetSpec* b) {
              return a->name < b->name;
            });
  return out;
}

}  // namespace backfill
