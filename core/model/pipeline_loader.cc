#include "core/model/pipeline_loader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/base/sv.h"
#include "core/model/catalog.h"
#include "core/model/check_spec_yaml.h"
#include "core/model/consumer_spec.h"
#include "core/model/partition.h"
#include "core/model/partition_mapping.h"
#include "core/model/pipeline_yaml.h"
#include "core/model/quantity_text.h"
#include "core/model/replay_spec_yaml.h"
#include "core/model/transform_parameters.h"
#include "core/model/transform_sql.h"

namespace backfill {
namespace {

constexpr char kDatasetKeys[] =
    "name, kind, table, partition, upstream, transform, version, contract, "
    "max_parallel, require_approval, checks, description, retention, "
    "max_cost, entity_key, consumers, replay, frozen";

class FileParser : public YamlFileReader {
 public:
  explicit FileParser(std::string file) : YamlFileReader(std::move(file)) {}

  // Parses one file's text; appends its datasets and, if it has one, sets
  // `*warehouse` and `*warehouse_line`.
  absl::Status Parse(const std::string& text, std::vector<DatasetSpec>* out,
                     std::optional<WarehouseSpec>* warehouse,
                     int* warehouse_line) {
    absl::StatusOr<std::vector<YAML::Mark>> docs =
        YamlDocumentStarts(file(), text);
    if (!docs.ok()) return docs.status();
    if (docs->size() > 1) {
      return ErrorAt((*docs)[1].line + 1,
                     absl::StrCat("the file has ", docs->size(),
                                  " YAML documents; expected one"));
    }
    // The one document (YAML::Load reads the first).
    const YAML::Node root = docs->empty() ? YAML::Node() : YAML::Load(text);
    if (root.IsNull()) {
      return ErrorAt(1,
                     "the file is empty; expected a map with a `datasets:` "
                     "list");
    }
    if (!root.IsMap()) {
      return Error(root, 1,
                   "expected a map with the keys `warehouse` and `datasets` "
                   "at the top level");
    }
    absl::Status s = CheckKeys(root, {"warehouse", "datasets"},
                               "at the top level", "warehouse, datasets");
    if (!s.ok()) return s;

    if (const YAML::Node w = root["warehouse"]; w) {
      absl::StatusOr<WarehouseSpec> spec = ParseWarehouse(w);
      if (!spec.ok()) return spec.status();
      *warehouse = *std::move(spec);
      *warehouse_line = LineOf(w, 1);
    }
    const YAML::Node ds = root["datasets"];
    if (!ds) {
      if (*warehouse) return absl::OkStatus();
      return Error(root, 1, "missing `datasets:` list");
    }
    if (ds.IsNull()) return absl::OkStatus();  // `datasets:` with nothing
    if (!ds.IsSequence()) {
      return Error(ds, 1, "`datasets` must be a list of datasets");
    }
    for (const YAML::Node& d : ds) {
      absl::StatusOr<DatasetSpec> spec = ParseDataset(d);
      if (!spec.ok()) return spec.status();
      out->push_back(*std::move(spec));
    }
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<WarehouseSpec> ParseWarehouse(const YAML::Node& w) const {
    if (!w.IsMap()) {
      return Error(w, 1,
                   "`warehouse` must be a map: {engine: sqlite, path: FILE} "
                   "or {engine: postgres, dsn: \"host=... dbname=...\"}");
    }
    absl::Status s = CheckKeys(w, {"engine", "path", "dsn"}, "in warehouse",
                               "engine, path, dsn");
    if (!s.ok()) return s;
    WarehouseSpec spec;
    absl::StatusOr<std::optional<std::string>> engine =
        Scalar(w, "engine", "in warehouse", false);
    if (!engine.ok()) return engine.status();
    if (*engine) {
      if (**engine != "sqlite" && **engine != "postgres") {
        return Error(w["engine"], LineOf(w, 1),
                     absl::StrCat("warehouse engine \"", **engine,
                                  "\" is not supported; supported: sqlite, "
                                  "postgres"));
      }
      spec.engine = **engine;
    }
    absl::StatusOr<std::optional<std::string>> path =
        Scalar(w, "path", "in warehouse", false);
    if (!path.ok()) return path.status();
    absl::StatusOr<std::optional<std::string>> dsn =
        Scalar(w, "dsn", "in warehouse", false);
    if (!dsn.ok()) return dsn.status();
    if (spec.engine == "sqlite") {
      if (*dsn) {
        return Error(w["dsn"], LineOf(w, 1),
                     "`dsn` is for engine postgres; a sqlite warehouse is a "
                     "file: give `path`");
      }
      if (*path) {
        if ((*path)->empty()) {
          return Error(w["path"], LineOf(w, 1),
                       "warehouse path must not be empty");
        }
        spec.path = **path;
      }
      return spec;
    }
    if (*path) {
      return Error(w["path"], LineOf(w, 1),
                   "`path` is for engine sqlite; a postgres warehouse is "
                   "reached by `dsn`");
    }
    if (!*dsn || absl::StripAsciiWhitespace(**dsn).empty()) {
      return Error(w, 1,
                   "engine postgres needs `dsn`, a libpq connection string "
                   "such as \"host=db.internal port=5432 dbname=analytics "
                   "user=backfill\"");
    }
    spec.path.clear();
    spec.dsn = **dsn;
    return spec;
  }

  absl::StatusOr<DatasetSpec> ParseDataset(const YAML::Node& d) const {
    if (!d.IsMap()) {
      return Error(d, 1,
                   "each entry of `datasets` must be a map with at least "
                   "`name` and `kind`");
    }
    DatasetSpec spec;
    spec.file = file();
    spec.line = LineOf(d, 1);

    // The name first, so that later errors can say which dataset.
    std::string where = "in a dataset";
    if (const YAML::Node n = d["name"]; n && n.IsScalar()) {
      where = absl::StrCat("in dataset \"", n.Scalar(), "\"");
    }
    absl::Status s =
        CheckKeys(d,
                  {"name", "kind", "table", "partition", "upstream",
                   "transform", "version", "contract", "max_parallel",
                   "require_approval", "checks", "description", "retention",
                   "max_cost", "entity_key", "consumers", "replay", "frozen"},
                  where, kDatasetKeys);
    if (!s.ok()) return s;

    absl::StatusOr<std::optional<std::string>> name =
        Scalar(d, "name", where, true);
    if (!name.ok()) return name.status();
    spec.name = **name;

    absl::StatusOr<std::optional<std::string>> kind =
        Scalar(d, "kind", where, true);
    if (!kind.ok()) return kind.status();
    if (**kind == "source") {
      spec.kind = DatasetKind::kSource;
    } else if (**kind == "derived") {
      spec.kind = DatasetKind::kDerived;
    } else {
      return Error(d["kind"], spec.line,
                   absl::StrCat("kind \"", **kind, "\" ", where,
                                " is not valid; expected source or derived"));
    }

    absl::StatusOr<std::optional<std::string>> table =
        Scalar(d, "table", where, false);
    if (!table.ok()) return table.status();
    spec.table = table->value_or(spec.name);

    if (const YAML::Node p = d["partition"]; p && !p.IsNull()) {
      absl::StatusOr<PartitionSpec> part = ParsePartition(p, where);
      if (!part.ok()) return part.status();
      spec.partition = *std::move(part);
    }

    if (const YAML::Node u = d["upstream"]; u && !u.IsNull()) {
      if (!u.IsSequence()) {
        return Error(u, spec.line,
                     absl::StrCat("`upstream` ", where,
                                  " must be a list of {dataset, mapping}"));
      }
      for (const YAML::Node& e : u) {
        absl::StatusOr<UpstreamEdge> edge = ParseUpstream(e, where);
        if (!edge.ok()) return edge.status();
        spec.upstream.push_back(*std::move(edge));
      }
    }

    absl::StatusOr<std::optional<std::string>> transform =
        Scalar(d, "transform", where, false);
    if (!transform.ok()) return transform.status();
    if (*transform) {
      // The upstream and the partition are parsed; entity_key further down.
      ExtraParameters extra = ExtraParametersOf(spec);
      extra.keys = d["entity_key"].IsDefined();
      absl::StatusOr<std::string> sql = CanonicalTransform(**transform, extra);
      if (!sql.ok()) {
        return Error(
            d["transform"], spec.line,
            absl::StrCat("transform ", where, ": ", sql.status().message()));
      }
      spec.transform = *std::move(sql);
      spec.transform_line = LineOf(d["transform"], spec.line);
    }

    absl::StatusOr<std::optional<std::string>> version =
        Scalar(d, "version", where, false);
    if (!version.ok()) return version.status();
    if (*version) {
      if ((*version)->empty()) {
        return Error(d["version"], spec.line,
                     absl::StrCat("`version` ", where, " must not be empty"));
      }
      spec.transform_version = **version;
    } else if (!spec.transform.empty()) {
      spec.transform_version = TransformVersion(spec.transform);
    }

    if (const YAML::Node c = d["contract"]; c && !c.IsNull()) {
      s = ParseContract(c, where, &spec);
      if (!s.ok()) return s;
    }

    absl::StatusOr<std::optional<std::string>> max_parallel =
        Scalar(d, "max_parallel", where, false);
    if (!max_parallel.ok()) return max_parallel.status();
    if (*max_parallel) {
      int n = 0;
      if (!absl::SimpleAtoi(**max_parallel, &n) || n < 1 || n > 100000) {
        return Error(
            d["max_parallel"], spec.line,
            absl::StrCat("`max_parallel` ", where, " is \"", **max_parallel,
                         "\"; expected a whole number from 1 to "
                         "100000"));
      }
      if (spec.kind != DatasetKind::kDerived) {
        return Error(d["max_parallel"], spec.line,
                     absl::StrCat("`max_parallel` ", where,
                                  " is only allowed on derived datasets"));
      }
      spec.max_parallel = n;
    }

    for (const char* key : {"replay", "frozen"}) {
      const YAML::Node node = d[key];
      if (!node || node.IsNull()) continue;
      if (spec.kind != DatasetKind::kDerived) {
        return Error(node, spec.line,
                     absl::StrCat("`", key, "` ", where,
                                  " is only allowed on derived datasets (no "
                                  "job writes a source)"));
      }
      if (!spec.partition || !IsTimeGrain(spec.partition->grain)) {
        return Error(node, spec.line,
                     absl::StrCat("`", key, "` ", where,
                                  " needs a dataset partitioned by hour, day "
                                  "or month: its periods are times"));
      }
      if (std::string_view(key) == "replay") {
        ASSIGN_OR_RETURN(spec.replay, ParseReplayYaml(*this, node, where));
      } else {
        ASSIGN_OR_RETURN(spec.frozen, ParseFrozenYaml(*this, node, where));
      }
    }
    if (const YAML::Node r = d["retention"]; r && !r.IsNull()) {
      if (spec.kind != DatasetKind::kDerived) {
        return Error(r, spec.line,
                     absl::StrCat("`retention` ", where,
                                  " is only allowed on derived datasets (a "
                                  "source has no rollback copies)"));
      }
      absl::StatusOr<RetentionPolicy> retention = ParseRetention(r, where);
      if (!retention.ok()) return retention.status();
      spec.retention = *retention;
    }
    absl::StatusOr<std::optional<std::string>> require_approval =
        Scalar(d, "require_approval", where, false);
    if (!require_approval.ok()) return require_approval.status();
    if (*require_approval) {
      const std::string& v = **require_approval;
      if (v == "true" || v == "True" || v == "TRUE") {
        spec.require_approval = true;
      } else if (v == "false" || v == "False" || v == "FALSE") {
        spec.require_approval = false;
      } else {
        return Error(d["require_approval"], spec.line,
                     absl::StrCat("`require_approval` ", where, " is \"", v,
                                  "\"; expected true or false"));
      }
      if (spec.require_approval && spec.kind != DatasetKind::kDerived) {
        return Error(d["require_approval"], spec.line,
                     absl::StrCat("`require_approval` ", where,
                                  " is only allowed on derived datasets (a "
                                  "source is never published by a backfill)"));
      }
    }
    absl::StatusOr<std::optional<std::string>> max_cost =
        Scalar(d, "max_cost", where, false);
    if (!max_cost.ok()) return max_cost.status();
    if (*max_cost) {
      double v = 0;
      if (!absl::SimpleAtod(**max_cost, &v) || !std::isfinite(v) || v <= 0) {
        return Error(d["max_cost"], spec.line,
                     absl::StrCat("`max_cost` ", where, " is \"", **max_cost,
                                  "\"; expected a positive number of input "
                                  "rows (e.g. 1000000)"));
      }
      if (spec.kind != DatasetKind::kDerived) {
        return Error(d["max_cost"], spec.line,
                     absl::StrCat("`max_cost` ", where,
                                  " is only allowed on derived datasets (a "
                                  "source is never recomputed)"));
      }
      spec.max_cost = v;
    }
    absl::StatusOr<std::optional<std::string>> entity_key =
        Scalar(d, "entity_key", where, false);
    if (!entity_key.ok()) return entity_key.status();
    if (*entity_key) {
      if (spec.kind != DatasetKind::kDerived) {
        return Error(d["entity_key"], spec.line,
                     absl::StrCat("`entity_key` ", where,
                                  " is only allowed on derived datasets (a "
                                  "source is never recomputed)"));
      }
      std::vector<std::string> names;
      bool found = false;
      for (const ColumnSpec& c : spec.columns) {
        names.push_back(c.name);
        found = found || c.name == **entity_key;
      }
      if (!found) {
        return Error(
            d["entity_key"], spec.line,
            absl::StrCat("`entity_key` ", where, " is \"", **entity_key,
                         "\", which is not a contract column; contract "
                         "columns: ",
                         names.empty() ? "(none declared)"
                                       : absl::StrJoin(names, ", ")));
      }
      if (spec.partition && (spec.partition->column == **entity_key ||
                             spec.partition->key_column == **entity_key)) {
        return Error(
            d["entity_key"], spec.line,
            absl::StrCat("`entity_key` ", where, " is \"", **entity_key, "\", ",
                         spec.partition->column == **entity_key
                             ? "the partition column"
                             : "the partition's key column",
                         "; name the column that identifies an entity "
                         "within a partition"));
      }
      spec.entity_key = **entity_key;
    }
    if (const YAML::Node checks = d["checks"]; checks && !checks.IsNull()) {
      if (!checks.IsSequence()) {
        return Error(checks, spec.line,
                     absl::StrCat("`checks` ", where,
                                  " must be a list of checks, each a map "
                                  "with a `kind`"));
      }
      for (const YAML::Node& c : checks) {
        absl::StatusOr<CheckSpec> check = ParseCheckYaml(*this, c, where);
        if (!check.ok()) return check.status();
        spec.checks.push_back(*std::move(check));
      }
    }

    if (const YAML::Node consumers = d["consumers"];
        consumers && !consumers.IsNull()) {
      if (spec.kind != DatasetKind::kDerived) {
        return Error(consumers, spec.line,
                     absl::StrCat("`consumers` ", where,
                                  " is only allowed on derived datasets (a "
                                  "source is never published by a backfill, "
                                  "so there is nothing to confirm)"));
      }
      ASSIGN_OR_RETURN(
          spec.consumers,
          ParseConsumers(consumers, file(), where, spec.two_dimensional(),
                         spec.partition.has_value()));
    }

    if (const YAML::Node desc = d["description"];
        desc && !desc.IsNull() && !desc.IsScalar()) {
      return Error(desc, spec.line,
                   absl::StrCat("`description` ", where, " must be text"));
    }
    return spec;
  }

  // `retention: {versions: N, max_age: D}`: at least one of the two; D is
  // a whole number with a unit s, m, h or d ("30d").
  absl::StatusOr<RetentionPolicy> ParseRetention(
      const YAML::Node& r, const std::string& where) const {
    const std::string in =
        absl::StrCat("in the retention of ", where.substr(3));
    if (!r.IsMap()) {
      return Error(r, 1,
                   absl::StrCat("`retention` ", where,
                                " must be a map {versions: N, max_age: D}"));
    }
    absl::Status s =
        CheckKeys(r, {"versions", "max_age"}, in, "versions, max_age");
    if (!s.ok()) return s;
    RetentionPolicy policy;
    policy.declared = true;
    absl::StatusOr<std::optional<std::string>> versions =
        Scalar(r, "versions", in, false);
    if (!versions.ok()) return versions.status();
    absl::StatusOr<std::optional<std::string>> max_age =
        Scalar(r, "max_age", in, false);
    if (!max_age.ok()) return max_age.status();
    if (!*versions && !*max_age) {
      return Error(r, LineOf(r, 1),
                   absl::StrCat("`retention` ", where,
                                " needs `versions:`, `max_age:` or both"));
    }
    if (*versions) {
      int n = 0;
      if (!absl::SimpleAtoi(**versions, &n) || n < 1 || n > 100000) {
        return Error(r["versions"], LineOf(r, 1),
                     absl::StrCat("`versions` ", in, " is \"", **versions,
                                  "\"; expected a whole number from 1 to "
                                  "100000 (rollback copies kept per dataset)"));
      }
      policy.versions = n;
    }
    if (*max_age) {
      const std::string& text = **max_age;
      const std::optional<absl::Duration> age = ParseDurationText(text);
      if (!age) {
        return Error(r["max_age"], LineOf(r, 1),
                     absl::StrCat("`max_age` ", in, " is \"", text,
                                  "\"; expected a whole number of seconds, "
                                  "minutes, hours or days such as 30d, 12h, "
                                  "90m or 3600s"));
      }
      policy.max_age = *age;
      if (policy.max_age > kMaxDurationText) {
        return Error(r["max_age"], LineOf(r, 1),
                     absl::StrCat("`max_age` ", in, " is \"", text,
                                  "\"; at most 36500d"));
      }
    }
    return policy;
  }

  absl::StatusOr<PartitionSpec> ParsePartition(const YAML::Node& p,
                                               const std::string& where) const {
    if (!p.IsMap()) {
      return Error(p, 1,
                   absl::StrCat("`partition` ", where,
                                " must be a map {column, grain[, keys]}"));
    }
    const std::string pwhere =
        absl::StrCat("in the partition of ", where.substr(3));
    absl::Status s = CheckKeys(p, {"column", "grain", "keys", "key_column"},
                               pwhere, "column, grain, keys, key_column");
    if (!s.ok()) return s;
    PartitionSpec spec;
    absl::StatusOr<std::optional<std::string>> column =
        Scalar(p, "column", pwhere, true);
    if (!column.ok()) return column.status();
    spec.column = **column;
    absl::StatusOr<std::optional<std::string>> grain =
        Scalar(p, "grain", pwhere, true);
    if (!grain.ok()) return grain.status();
    absl::StatusOr<Grain> g = ParseGrain(**grain);
    if (!g.ok()) {
      return Error(p["grain"], LineOf(p, 1),
                   absl::StrCat(g.status().message(), " ", pwhere));
    }
    spec.grain = *g;
    if (const YAML::Node keys = p["keys"]; keys && !keys.IsNull()) {
      if (!keys.IsSequence()) {
        return Error(keys, LineOf(p, 1),
                     absl::StrCat("`keys` ", pwhere, " must be a list"));
      }
      for (const YAML::Node& k : keys) {
        if (!k.IsScalar()) {
          return Error(k, LineOf(keys, 1),
                       absl::StrCat("each of `keys` ", pwhere,
                                    " must be a single value"));
        }
        spec.keys.push_back(k.Scalar());
      }
    }
    if (const YAML::Node kc = p["key_column"]; kc && !kc.IsNull()) {
      absl::StatusOr<std::optional<std::string>> key_column =
          Scalar(p, "key_column", pwhere, true);
      if (!key_column.ok()) return key_column.status();
      spec.key_column = **key_column;
      if (!IsTimeGrain(spec.grain)) {
        return Error(kc, LineOf(p, 1),
                     absl::StrCat("`key_column:` ", pwhere,
                                  " needs a time grain (hour, day or month) "
                                  "for a time x key partition, not grain ",
                                  GrainName(spec.grain)));
      }
      if (spec.keys.empty()) {
        return Error(kc, LineOf(p, 1),
                     absl::StrCat("`key_column:` ", pwhere,
                                  " needs a non-empty `keys:` list (the "
                                  "declared keys of the key dimension)"));
      }
      for (size_t i = 0; i < spec.keys.size(); ++i) {
        absl::Status valid = ValidateDimensionKey(spec.keys[i]);
        if (!valid.ok()) {
          return Error(p["keys"][i], LineOf(p["keys"], LineOf(p, 1)),
                       absl::StrCat("`keys:` ", pwhere, ": ", valid.message()));
        }
      }
      return spec;
    }
    if (spec.grain == Grain::kKey && spec.keys.empty()) {
      return Error(p, 1,
                   absl::StrCat("grain key ", pwhere,
                                " needs a non-empty `keys:` list"));
    }
    if (spec.grain != Grain::kKey && !spec.keys.empty()) {
      return Error(p["keys"], LineOf(p, 1),
                   absl::StrCat("`keys:` ", pwhere,
                                " is only allowed with grain key, or with a "
                                "time grain and a `key_column:` (time x key)"));
    }
    return spec;
  }

  absl::StatusOr<UpstreamEdge> ParseUpstream(const YAML::Node& e,
                                             const std::string& where) const {
    if (!e.IsMap()) {
      return Error(e, 1,
                   absl::StrCat("each `upstream` entry ", where,
                                " must be a map {dataset, mapping}"));
    }
    const std::string uwhere =
        absl::StrCat("in an upstream of ", where.substr(3));
    absl::Status s = CheckKeys(e, {"dataset", "mapping", "lookback"}, uwhere,
                               "dataset, mapping, lookback");
    if (!s.ok()) return s;
    UpstreamEdge edge;
    absl::StatusOr<std::optional<std::string>> ds =
        Scalar(e, "dataset", uwhere, true);
    if (!ds.ok()) return ds.status();
    edge.dataset = **ds;
    const std::string named =
        absl::StrCat("upstream \"", edge.dataset, "\" ", where);
    constexpr char kExpected[] =
        "expected identity, all, rollup or {lookback: N}";
    const YAML::Node m = e["mapping"];
    const YAML::Node n = e["lookback"];
    // `{dataset: d, lookback: 7}`: a lookback without a `mapping:` key.
    if (n && !n.IsNull()) {
      if (m && !m.IsNull() && !(m.IsScalar() && m.Scalar() == "lookback")) {
        return Error(n, LineOf(e, 1),
                     absl::StrCat("`lookback:` ", named,
                                  " goes with no `mapping:` (or `mapping: "
                                  "lookback`), but the mapping is ",
                                  m.IsScalar() ? m.Scalar() : "a map"));
      }
      edge.mapping = Mapping::kLookback;
      ASSIGN_OR_RETURN(edge.lookback, LookbackCount(n, e, named));
      return edge;
    }
    if (!m || m.IsNull()) {
      return Error(
          m ? m : e, LineOf(e, 1),
          absl::StrCat("missing `mapping:` ", uwhere, "; ", kExpected));
    }
    if (m.IsMap()) {
      if (m.size() != 1 || !m.begin()->first.IsScalar() ||
          m.begin()->first.Scalar() != "lookback") {
        return Error(
            m, LineOf(e, 1),
            absl::StrCat("`mapping` ", named,
                         " as a map must be {lookback: N}; ", kExpected));
      }
      edge.mapping = Mapping::kLookback;
      ASSIGN_OR_RETURN(edge.lookback,
                       LookbackCount(m.begin()->second, e, named));
      return edge;
    }
    if (!m.IsScalar()) {
      return Error(m, LineOf(e, 1),
                   absl::StrCat("`mapping` ", uwhere,
                                " must be a word or "
                                "{lookback: N}; ",
                                kExpected));
    }
    const std::string mapping = m.Scalar();
    if (mapping == "identity") {
      edge.mapping = Mapping::kIdentity;
    } else if (mapping == "all") {
      edge.mapping = Mapping::kAll;
    } else if (mapping == "rollup") {
      edge.mapping = Mapping::kRollup;
    } else if (mapping == "lookback") {
      return Error(m, LineOf(e, 1),
                   absl::StrCat("mapping lookback ", named,
                                " needs the number of previous partitions: "
                                "write `mapping: {lookback: 7}` (or "
                                "`lookback: 7` without `mapping:`)"));
    } else {
      return Error(m, LineOf(e, 1),
                   absl::StrCat("unknown mapping \"", mapping, "\" ", uwhere,
                                "; ", kExpected));
    }
    return edge;
  }

  // The N of a lookback: an integer 1..kMaxLookback.
  absl::StatusOr<int> LookbackCount(const YAML::Node& n, const YAML::Node& e,
                                    const std::string& named) const {
    int value = 0;
    if (!n || !n.IsScalar() || !absl::SimpleAtoi(n.Scalar(), &value) ||
        value < 1 || value > kMaxLookback) {
      return Error(
          n ? n : e, LineOf(e, 1),
          absl::StrCat("lookback ", named,
                       " must be a whole number of partitions from 1 "
                       "to ",
                       kMaxLookback, ", e.g. `mapping: {lookback: 7}`",
                       n && n.IsScalar()
                           ? absl::StrCat(" (got \"", n.Scalar(), "\")")
                           : ""));
    }
    return value;
  }

  absl::Status ParseContract(const YAML::Node& c, const std::string& where,
                             DatasetSpec* spec) const {
    const std::string cwhere =
        absl::StrCat("in the contract of ", where.substr(3));
    if (!c.IsMap()) {
      return Error(c, spec->line,
                   absl::StrCat("`contract` ", where,
                                " must be a map {columns, primary_key}"));
    }
    absl::Status s = CheckKeys(c, {"columns", "primary_key"}, cwhere,
                               "columns, primary_key");
    if (!s.ok()) return s;
    if (const YAML::Node cols = c["columns"]; cols && !cols.IsNull()) {
      if (!cols.IsMap()) {
        return Error(cols, LineOf(c, 1),
                     absl::StrCat("`columns` ", cwhere,
                                  " must be a map of column name to SQL type"));
      }
      std::set<std::string> seen;
      for (const auto& kv : cols) {
        if (!kv.first.IsScalar() || !kv.second.IsScalar()) {
          return Error(kv.first, LineOf(cols, 1),
                       absl::StrCat("each of `columns` ", cwhere,
                                    " must be `name: TYPE`"));
        }
        if (!seen.insert(kv.first.Scalar()).second) {
          return Error(kv.first, LineOf(cols, 1),
                       absl::StrCat("column \"", kv.first.Scalar(), "\" ",
                                    cwhere, " is declared twice"));
        }
        spec->columns.push_back({kv.first.Scalar(), kv.second.Scalar()});
      }
    }
    if (const YAML::Node pk = c["primary_key"]; pk && !pk.IsNull()) {
      if (!pk.IsSequence()) {
        return Error(pk, LineOf(c, 1),
                     absl::StrCat("`primary_key` ", cwhere,
                                  " must be a list of column names"));
      }
      for (const YAML::Node& k : pk) {
        if (!k.IsScalar()) {
          return Error(k, LineOf(pk, 1),
                       absl::StrCat("each of `primary_key` ", cwhere,
                                    " must be a column name"));
        }
        spec->primary_key.push_back(k.Scalar());
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

absl::StatusOr<Catalog> LoadPipelineTexts(
    const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<DatasetSpec> datasets;
  std::optional<WarehouseSpec> warehouse;
  std::string warehouse_file;
  int warehouse_line = 0;
  for (const auto& [file, text] : files) {
    std::optional<WarehouseSpec> file_warehouse;
    int line = 0;
    absl::Status s;
    try {
      s = FileParser(file).Parse(text, &datasets, &file_warehouse, &line);
    } catch (const YAML::Exception& e) {
      const int at = e.mark.is_null() ? 1 : e.mark.line + 1;
      return absl::InvalidArgumentError(
          absl::StrCat(file, ":", at, ": invalid YAML: ", e.msg));
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": cannot read the pipeline: ", e.what()));
    }
    if (!s.ok()) return s;
    if (file_warehouse) {
      if (warehouse) {
        return absl::InvalidArgumentError(
            absl::StrCat(file, ":", line, ": `warehouse:` is already set at ",
                         warehouse_file, ":", warehouse_line,
                         "; at most one pipeline file may set it"));
      }
      warehouse = std::move(file_warehouse);
      warehouse_file = file;
      warehouse_line = line;
    }
  }
  if (datasets.empty()) {
    return absl::InvalidArgumentError(
        files.empty() ? "no pipeline files"
                      : "the pipeline files declare no datasets");
  }
  return Catalog::Build(std::move(datasets),
                        warehouse.value_or(WarehouseSpec{}));
}

absl::StatusOr<Catalog> LoadPipelineDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline directory ", dir, " does not exist"));
  }
  if (!fs::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline path ", dir, " is not a directory"));
  }
  std::vector<fs::path> paths;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string ext = p.extension().string();
    if ((ext == ".yaml" || ext == ".yml") && it->is_regular_file(ec)) {
      paths.push_back(p);
    }
  }
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot list pipeline directory ", dir, ": ", ec.message()));
  }
  if (paths.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no pipeline files (*.yaml, *.yml) in directory ", dir));
  }
  std::sort(paths.begin(), paths.end(),
            [](const fs::path& a, const fs::path& b) {
              return a.filename() < b.filename();
            });
  std::vector<std::pair<std::string, std::string>> files;
  for (const fs::path& p : paths) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read pipeline file ", p.string()));
    }
    files.emplace_back(p.string(), text.str());
  }
  return LoadPipelineTexts(files);
}

}  // namespace backfill
