// Catalog: the immutable set of datasets declared in the pipeline files,
// validated as a whole (every upstream exists, no cycles, mappings fit the
// grains, derived datasets have a transform and a contract).
//
// A Catalog is built once (see pipeline_loader.h) and then only read; it is
// thread-safe for concurrent readers. DatasetSpec pointers it hands out live
// as long as the Catalog.

#ifndef BACKFILL_CORE_MODEL_CATALOG_H_
#define BACKFILL_CORE_MODEL_CATALOG_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/check_result.h"
#include "core/model/consumer_spec.h"
#include "core/model/partition.h"
#include "core/model/partition_layout.h"
#include "core/model/replay_policy.h"

namespace backfill {

enum class DatasetKind { kSource, kDerived };
const char* DatasetKindName(DatasetKind kind);  // "source" / "derived"

// How a partition of a dataset maps to the partitions of one upstream
// (the arithmetic is in partition_mapping.h, per edge in
// upstream_mapping.h).
enum class Mapping {
  kIdentity,  // the same partition value of the upstream (same grain)
  kAll,       // the whole upstream (a dimension); pinned per job
  kRollup,    // the finer upstream partitions inside this coarser one
  kLookback,  // the upstream partitions P-N .. P of the same time grain
};
// "identity" / "all" / "rollup" / "lookback".
const char* MappingName(Mapping mapping);

struct UpstreamEdge {
  std::string dataset;
  Mapping mapping = Mapping::kIdentity;
  int lookback = 0;  // kLookback only: N, 1..kMaxLookback; 0 otherwise
};

struct PartitionSpec {
  std::string column;
  Grain grain = Grain::kNone;
  // The declared keys: of the key grain (grain == kKey), or of the key
  // dimension (key_column set); empty otherwise.
  std::vector<std::string> keys;
  // Time x key (two-dimensional, see partition_layout.h): the column of the
  // key dimension, with a time grain on `column`. Empty otherwise.
  std::string key_column = {};

  bool two_dimensional() const { return !key_column.empty(); }
};

struct ColumnSpec {
  std::string name;
  std::string type;  // SQL type as declared: TEXT, INTEGER, REAL, ...
};

// Checks a contract column type, which engines splice into CREATE TABLE:
// a type name of one or two words ([A-Za-z_][A-Za-z0-9_]*), optionally
// followed by "(N)" or "(N, M)", e.g. TEXT, DOUBLE PRECISION, VARCHAR(32),
// NUMERIC(10, 2); no constraint keyword (PRIMARY, KEY, NOT, NULL, UNIQUE,
// CHECK, DEFAULT, COLLATE, REFERENCES, GENERATED, AS, CONSTRAINT,
// AUTOINCREMENT) in any letter case. INVALID_ARGUMENT with the reason.
absl::Status CheckColumnType(std::string_view type);

// How long the rollback copies of a derived dataset are kept (the rows each
// publish replaced, which a rollback restores). A copy is dropped once it
// is not among the `versions` newest copies of the dataset, or once it is
// older than `max_age` (when set). A job whose copy was dropped can no
// longer be rolled back. Declared as `retention: {versions: N, max_age: D}`.
inline constexpr int kDefaultRetentionVersions = 10;
struct RetentionPolicy {
  int versions = kDefaultRetentionVersions;       // >= 1
  absl::Duration max_age = absl::ZeroDuration();  // zero: no age limit
  bool declared = false;                          // false: the defaults above
};

// A check declared in a dataset's `checks:` list (docs/pipeline-spec.md).
enum class CheckKind {
  kRowChange,      // staged rows per partition vs the published rows
  kMinRows,        // at least `min` staged rows per partition
  kMeasureChange,  // SUM(column) per partition and per job vs published
  kReferences,     // staged `column` values missing from `dataset`.`key`
  kNotNull,        // no NULL in `columns`
  kAssert,         // `sql` returns no row
};
const char* CheckKindName(CheckKind kind);  // "row_change", ...
absl::StatusOr<CheckKind> ParseCheckKind(std::string_view name);

struct CheckSpec {
  CheckKind kind = CheckKind::kRowChange;
  std::string name;  // `name:`, else derived from the kind (and column)
  CheckSeverity severity = CheckSeverity::kError;
  double max_change = 0;        // row_change, measure_change: a fraction (0.2)
  std::string max_change_text;  // as written ("20%")
  int64_t min = 1;              // min_rows
  std::string column;           // measure_change, references
  std::vector<std::string> columns;  // not_null
  std::string dataset;               // references: the referenced dataset
  std::string key;                   // references: its key column
  int64_t max_orphans = 0;           // references
  std::string sql;                   // assert: one SELECT
  int line = 0;                      // where it was declared
  std::string text;                  // the declaration, as the API lists it
};

struct DatasetSpec {
  std::string name;
  DatasetKind kind = DatasetKind::kSource;
  std::string table;
  std::optional<PartitionSpec> partition;  // nullopt: unpartitioned.
  std::vector<UpstreamEdge> upstream;
  std::string transform;            // derived only: one SELECT.
  std::string transform_version;    // `version:` or hash of normalized text.
  std::vector<ColumnSpec> columns;  // contract.columns, declaration order.
  std::vector<std::string> primary_key;
  // At most this many partitions of the dataset are recomputed at once,
  // over all jobs (0: no limit but the worker count).
  int max_parallel = 0;
  RetentionPolicy retention;  // derived datasets only
  // Every job that writes the dataset stops in AWAITING_APPROVAL once it is
  // validated, until an operator approves it (derived datasets only).
  bool require_approval = false;
  // Budget: a job whose estimated cost of this dataset (input rows) is
  // above it is refused (derived datasets only; 0: none).
  double max_cost = 0;
  // The contract column that identifies an entity (e.g. customer_id):
  // requests may then replace only the rows of some keys (`--keys`) in the
  // partitions they recompute (derived datasets only; "": none).
  std::string entity_key;
  std::vector<CheckSpec> checks;  // declared checks, in file order
  // When the daemon replays partitions by itself, and which periods no job
  // changes (replay_policy.h; derived datasets partitioned in time only).
  std::optional<ReplayPolicy> replay;
  std::optional<FrozenRule> frozen;
  // Downstream consumers confirmed after each publish (consumer_spec.h),
  // in file order (derived datasets only).
  std::vector<ConsumerSpec> consumers;
  std::string file;  // where it was declared, for error messages
  int line = 0;
  int transform_line = 0;  // the `transform:` key's line (0: unknown)

  // The grain; a two-dimensional dataset's time grain.
  Grain grain() const { return partition ? partition->grain : Grain::kNone; }
  // The grain and, for a two-dimensional dataset, its declared keys: what
  // its partition values look like (partition_layout.h).
  PartitionLayout layout() const {
    if (partition && partition->two_dimensional()) {
      return PartitionLayout(partition->grain, partition->keys);
    }
    return PartitionLayout(grain());
  }
  bool two_dimensional() const {
    return partition && partition->two_dimensional();
  }
  bool is_derived() const { return kind == DatasetKind::kDerived; }
};

// `partition` names a partition of `ds`: ValidatePartition of its layout
// (partition_layout.h: format, and the declared keys of a time x key
// dataset) and, for a key-grain dataset, one of its declared keys.
// INVALID_ARGUMENT otherwise: "\"nope\" is not a key of dataset
// \"by_region\"; declared keys: eu, us".
absl::Status ValidateDatasetPartition(const DatasetSpec& ds,
                                      const std::string& partition);

// Where the warehouse is: `engine` "sqlite" with a file `path` (relative to
// --data-dir), or "postgres" with a libpq connection string `dsn` (no
// password: libpq reads it from PGPASSWORD, ~/.pgpass or PGPASSFILE).
struct WarehouseSpec {
  std::string engine = "sqlite";
  std::string path = "warehouse.db";  // sqlite only
  std::string dsn;                    // postgres only
};

class Catalog {
 public:
  Catalog() = default;

  // Validates and builds a catalog. Errors are INVALID_ARGUMENT naming the
  // dataset, its file and line, and the reason. Dataset names, table names
  // and the contract columns of a dataset must be unique ignoring ASCII
  // letter case (SQLite identifiers are case-insensitive, even quoted), and
  // none of these names nor a partition column may start with "_bf_" (the
  // engine's tables) or "sqlite_" (SQLite's), in any letter case.
  static absl::StatusOr<Catalog> Build(std::vector<DatasetSpec> datasets,
                                       WarehouseSpec warehouse);

  // nullptr when there is no such dataset.
  const DatasetSpec* Find(std::string_view name) const;

  // All datasets in a topological order: every upstream before its
  // dependents; ties broken by name.
  const std::vector<DatasetSpec>& datasets() const { return datasets_; }

  // Derived datasets that name `name` as a direct upstream, by name.
  std::vector<const DatasetSpec*> DirectDependents(std::string_view name) const;

  const WarehouseSpec& warehouse() const { return warehouse_; }

 private:
  std::vector<DatasetSpec> datasets_;
  std::map<std::string, size_t, std::less<>> index_;
  WarehouseSpec warehouse_;
};

}  // namespace backfill

#endif  // BACKFILL_CORE_MODEL_CATALOG_H_
