// Dialect: what the SQL text of the warehouse engine's shared units
// (storage/sql/) needs to know of one database: how it quotes names and
// marks parameters, where a job's artifacts and the published tables live,
// how contract columns become a table, the few expressions that are spelled
// differently, and partition membership (Membership). Standard SQL that
// every engine accepts is written by the units themselves; a dialect
// answers only where the engines differ. A new engine is one Dialect and
// one Connection (connection.h).
//
//   Relation    a table's schema and name, unquoted.
//   Membership  "the row belongs to partition P" for one dataset, over
//               bound parameters or over a row of a job's partition list,
//               and the partition of a row as an expression (the one
//               definition of membership, core/model/partition.h, in the
//               engine's SQL).
//
// Ownership: an engine owns its Dialect for its whole life; Memberships
// are made per call and owned by the caller.
// Thread-safety: a Dialect is immutable or synchronizes what it keeps, so
// that any thread may use it; a Membership is used by one thread.

#ifndef BACKFILL_STORAGE_SQL_DIALECT_H_
#define BACKFILL_STORAGE_SQL_DIALECT_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "storage/sql/connection.h"

namespace backfill::sql {

struct Relation {
  std::string schema;
  std::string name;
};

class Membership {
 public:
  virtual ~Membership() = default;
  // How many placeholders Condition uses.
  virtual int parameters() const = 0;
  // The condition "the row belongs to the partition" over the placeholders
  // first .. first + parameters() - 1 (TRUE, with none, for an
  // unpartitioned dataset). NULL rather than false for a row whose
  // partition column is NULL: select the rows outside with
  // `(condition) IS NOT TRUE`.
  virtual std::string Condition(int first) const = 0;
  // The values of those placeholders for `partition` (valid for the
  // dataset's layout: INVALID_ARGUMENT otherwise).
  virtual absl::StatusOr<Params> Values(const std::string& partition) const = 0;
  // The partition of a row as a text expression, NULL for none; '' for an
  // unpartitioned dataset.
  virtual std::string Expression() const = 0;
  // The condition against the row `alias` of a job's partition list
  // (Dialect::Parts), TRUE for an unpartitioned dataset.
  virtual std::string OverList(std::string_view alias) const = 0;
  // The columns a job's partition list keeps beside each partition's
  // "value" for OverList, as CREATE TABLE declares them, and their values
  // for `partition` (valid for the dataset's layout).
  virtual std::vector<std::string> ListColumns() const = 0;
  virtual absl::StatusOr<Params> ListValues(
      const std::string& partition) const = 0;
  // The partition columns of a row, for a SELECT list ("col[, key]"), and
  // for a GROUP BY that puts two values in one group only when they are
  // the same value ("" for an unpartitioned dataset).
  virtual std::string Columns() const = 0;
  virtual std::string GroupBy() const = 0;
};

class Dialect {
 public:
  virtual ~Dialect() = default;

  // The database as messages name it ("SQLite").
  virtual std::string product() const = 0;

  // ---- Names ---------------------------------------------------------------
  // `"name"` with embedded double quotes doubled: safe to splice into SQL as
  // an identifier whatever `name` holds.
  static std::string Quote(std::string_view name);
  // The job id with every character outside [A-Za-z0-9] replaced by '_',
  // as it appears in the names of the job's artifacts.
  static std::string SafeJob(const std::string& job_id);
  // The relation as SQL refers to it, schema and name quoted.
  virtual std::string Name(const Relation& relation) const;
  // The placeholder of the statement's `index`th parameter (1-based).
  virtual std::string Placeholder(int index) const = 0;
  // OK when the database keeps `name` as it is; INVALID_ARGUMENT naming
  // `what` otherwise (PostgreSQL cuts names after 63 bytes).
  virtual absl::Status CheckName(const std::string& name,
                                 const std::string& what) const;

  // ---- Where things live ---------------------------------------------------
  // The published table of a dataset.
  virtual Relation Published(const DatasetSpec& dataset) const = 0;
  // A job's staged rows of a dataset, its partitions of the dataset (the
  // partition list), its entity keys of it, its snapshot of a pinned input
  // and the rollback copy a publish of the job leaves.
  virtual Relation Stage(const std::string& job_id,
                         const std::string& dataset) const = 0;
  virtual Relation Parts(const std::string& job_id,
                         const std::string& dataset) const = 0;
  virtual Relation Keys(const std::string& job_id,
                        const std::string& dataset) const = 0;
  virtual Relation Pin(const std::string& job_id,
                       const DatasetSpec& dataset) const = 0;
  Relation Copy(const std::string& job_id, const std::string& dataset) const;
  // Where the rollback copies live and what every copy's name starts with
  // (Copy: the prefix, the job as SafeJob spells it, '_', the dataset).
  virtual Relation Copies() const = 0;
  // A temporary table or view of the session.
  virtual Relation Scratch(const std::string& name) const = 0;
  // The warehouse's own records (markers.h): (key, value) with the owner's
  // store id, the publication markers and the rollback markers.
  virtual Relation Meta() const = 0;
  virtual Relation Publications() const = 0;
  virtual Relation Rollbacks() const = 0;
  // Makes the place a job's staging lives in, where it needs one (in the
  // caller's transaction; nothing by default).
  virtual absl::Status CreateJobSpace(Connection* conn,
                                      const std::string& job_id) const;
  // In the caller's transaction, before SQL the engine did not write runs
  // (assertions, expect queries, statements described): the names it
  // uses resolve to the published tables (and the session's temporary
  // ones) only. Nothing by default.
  virtual absl::Status ScopeClientSql(Connection* conn) const;
  // The types of the contract's columns as the catalog names them
  // (Connection::Columns), in the contract's order; empty when they cannot
  // be read. By default the contract's own words.
  virtual absl::StatusOr<std::vector<std::string>> CatalogTypes(
      Connection* conn, const DatasetSpec& dataset) const;
  // The statements, in the caller's transaction, that make `snapshot` (a
  // job's pinned input, Pin) a copy of `table`. By default CREATE TABLE
  // ... AS SELECT: its columns and rows.
  virtual absl::StatusOr<std::vector<std::string>> PinStatements(
      Connection* conn, const Relation& table, const Relation& snapshot) const;
  // Keeps every other claim away from the records until the caller's
  // transaction ends, where its write transaction alone does not (nothing
  // by default).
  virtual absl::Status LockRecords(Connection* conn) const;
  // What a DROP TABLE of a job's partition or key list (PrepareJob
  // rebuilds them) ends with, so that it also drops the session views a
  // transform's connection made over the list while it stages a partition
  // (staging.cc): on a server they may still exist in a session of a
  // replica that lost the job while frozen, and would otherwise refuse the
  // drop to the replica that took the job over ("" by default).
  virtual std::string DropDependents() const;
  // Drops the place a job's staging lives in (its staged rows, partition
  // lists, keys and snapshots; not its rollback copies), in the caller's
  // transaction.
  virtual absl::Status DropJobSpace(Connection* conn,
                                    const std::string& job_id) const = 0;
  // The ids of the jobs whose staging is in the warehouse, of those whose
  // ids have the state store's form "bf-<digits>" (only they can be told
  // apart from what follows them in a name), sorted, without duplicates.
  virtual absl::StatusOr<std::vector<std::string>> ListJobSpaces(
      Connection* conn) const = 0;

  // ---- Types and expressions ----------------------------------------------
  // The contract's columns for CREATE TABLE: `"name" TYPE, ...` (each type
  // checked by CheckColumnType; INVALID_ARGUMENT naming the column).
  virtual absl::StatusOr<std::string> ColumnDefinitions(
      const DatasetSpec& dataset) const = 0;
  // The sum of a numeric expression as a double, 0 over no rows.
  virtual std::string Total(std::string_view expr) const = 0;
  // A value as SQL literal text: 'text' (quotes doubled), a number as
  // digits, NULL.
  virtual std::string QuoteValue(std::string_view expr) const = 0;
  // A row of `alias` as samples show it: "(name=literal, ...)" over the
  // contract's columns.
  virtual std::string RowText(const DatasetSpec& dataset,
                              std::string_view alias) const = 0;
  // The condition "the value of `column` does not fit the declared
  // `type`", where a value may (SQLite's affinity); nullopt where the
  // table's types hold every value to its type.
  virtual std::optional<std::string> TypeMismatch(
      std::string_view column, const std::string& type) const;
  // A value read back, as an SQL literal in a diff's samples.
  virtual std::string SampleLiteral(const Cell& cell) const = 0;
  // The placeholder of a time and a boolean parameter as the markers'
  // columns hold them, and the values bound to them (defaults: integers,
  // microseconds since the epoch and 0 or 1).
  virtual std::string TimePlaceholder(int index) const;
  virtual Param TimeValue(absl::Time when) const;
  virtual std::string BoolPlaceholder(int index) const;
  virtual Param BoolValue(bool value) const;
  virtual bool ReadBool(const Cell& cell) const;
  // What a SELECT ends with to keep the rows it read locked until the
  // transaction ends, shared or `exclusive`, where the database locks rows
  // ("" by default).
  virtual std::string LockingRead(bool exclusive) const;
  // The column types of the markers' times and booleans (markers.h;
  // default INTEGER, as TimeValue and BoolValue bind them).
  virtual std::string TimeType() const;
  virtual std::string BoolType() const;
  // 1 (true) when the entity key of the row (its columns after
  // `qualifier`) is one of the keys in `keys` (Keys()), else 0 (false):
  // never NULL. A value is compared as a key partition's value is: text as
  // it is, an integer by its decimal digits.
  virtual std::string InKeys(const DatasetSpec& dataset, const Relation& keys,
                             std::string_view qualifier = "") const = 0;

  // ---- Partition membership ------------------------------------------------
  // The membership of `dataset`'s rows with their columns named
  // `qualifier` + column (e.g. "_bf_t."), as the rows of its published
  // table and of every table made from its contract hold them. `conn` may
  // be read (the published table's column types).
  virtual absl::StatusOr<std::unique_ptr<Membership>> MembershipOf(
      Connection* conn, const DatasetSpec& dataset,
      std::string_view qualifier = "") const = 0;

  // ---- Change signal (change_signal.h)
  // --------------------------------------- The reserved tables of the change
  // signal: per source table its installation (table, epoch, identity), per
  // table and bucket a counter the triggers bump, and the cached fingerprints.
  virtual Relation ChangeTables() const = 0;
  virtual Relation ChangeCounts() const = 0;
  virtual Relation FingerprintCache() const = 0;
  // The statements, in the caller's write transaction, that drop the change
  // triggers `dataset`'s published table has and create them anew for
  // `epoch` (a name of [0-9a-f]), each bumping ChangeCounts() under the
  // bucket of every row it writes; empty when the table cannot carry them
  // (it does not exist, is a view, or has what the triggers cannot follow).
  virtual absl::StatusOr<std::vector<std::string>> ChangeTriggerSql(
      Connection* conn, const DatasetSpec& dataset,
      const std::string& epoch) const = 0;
  // The definition of `dataset`'s published table and of its change
  // triggers as the catalog has them now ("" when the table does not
  // exist): any change to either changes the text.
  virtual absl::StatusOr<std::string> ChangeIdentity(
      Connection* conn, const DatasetSpec& dataset) const = 0;
  // The bucket the rows of `partition` (valid, not "") are counted under.
  // Every row of the partition is counted under it; rows of other
  // partitions may be too (a coarser bucket only costs a recompute).
  virtual absl::StatusOr<std::string> ChangeBucket(
      const DatasetSpec& dataset, const std::string& partition) const = 0;

  // ---- Proven writes -------------------------------------------------------
  // The rows a statement of a publish or a rollback wrote, and how many of
  // them belong to the partition it meant, counted by a second
  // formulation of membership (SQLite: the candidates' values mapped in
  // C++; PostgreSQL: the partition expression over the rows it returns).
  struct Proven {
    int64_t affected = 0;
    int64_t belonging = 0;
  };
  // Deletes the rows of `partition` from `source` (`target` empty), or
  // copies them into `target` (`columns`: "*", or the list both take), in
  // the caller's transaction.
  virtual absl::StatusOr<Proven> WriteProven(
      Connection* conn, const DatasetSpec& dataset, const Relation& source,
      const std::optional<Relation>& target, const std::string& columns,
      const std::string& partition) const = 0;
};

}  // namespace backfill::sql

#endif  // BACKFILL_STORAGE_SQL_DIALECT_H_
