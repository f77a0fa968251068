#include "storage/sql/staging.h"

#include <map>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/base/stopwatch.h"
#include "core/model/fingerprint.h"
#include "core/model/transform_parameters.h"
#include "core/run/crash_point.h"
#include "storage/sql/change_signal.h"
#include "storage/sql/engine_checks.h"
#include "storage/sql/partition_parameters.h"

namespace backfill::sql {
namespace {

// The session's temporary table a transform's output goes to.
constexpr char kOutTable[] = "_bf_out";

// The statements of the objects the transform of `dataset` runs over: a
// view named like the table of each other dataset the job recomputes (its
// staged rows over its published rows outside the job's partitions), one
// named like each pinned input's table (its snapshot), and the output
// table.
absl::Status AddSetup(Connection* conn, const JobLayout& layout,
                      const DatasetSpec& dataset, TransformSetup* setup) {
  const Dialect& d = conn->dialect();
  const std::string& job_id = layout.job_id;
  std::set<std::string> shadowed;
  for (const JobLayout::Item& up : layout.items) {
    const DatasetSpec& u = *up.dataset;
    if (u.name == dataset.name || !shadowed.insert(u.table).second) continue;
    const Relation stage = d.Stage(job_id, u.name);
    const Relation parts = d.Parts(job_id, u.name);
    const Relation table = d.Published(u);
    setup->reads.insert({stage.name, table.name, parts.name});
    std::string sql =
        absl::StrCat("CREATE TEMP VIEW ", Dialect::Quote(u.table),
                     " AS SELECT ", ColumnList(u), " FROM ", d.Name(stage));
    ASSIGN_OR_RETURN(bool published, conn->Exists(table));
    if (published) {
      ASSIGN_OR_RETURN(std::unique_ptr<Membership> member,
                       d.MembershipOf(conn, u, "_bf_t."));
      absl::StrAppend(
          &sql, " UNION ALL SELECT ", ColumnList(u, "_bf_t."), " FROM ",
          d.Name(table), " AS _bf_t WHERE NOT EXISTS (SELECT 1 FROM ",
          d.Name(parts), " AS _bf_p WHERE ", member->OverList("_bf_p"), ")");
    }
    setup->statements.push_back(std::move(sql));
  }
  for (const DatasetSpec* pin : layout.pinned) {
    if (pin->name == dataset.name || FindItem(layout, pin->name) != nullptr ||
        !shadowed.insert(pin->table).second) {
      continue;
    }
    const Relation snapshot = d.Pin(job_id, *pin);
    setup->reads.insert(snapshot.name);
    setup->statements.push_back(
        absl::StrCat("CREATE TEMP VIEW ", Dialect::Quote(pin->table),
                     " AS SELECT * FROM ", d.Name(snapshot)));
  }
  ASSIGN_OR_RETURN(std::string defs, d.ColumnDefinitions(dataset));
  setup->statements.push_back(absl::StrCat(
      "CREATE TEMP TABLE ", Dialect::Quote(kOutTable), " (", defs, ")"));
  return absl::OkStatus();
}

// FAILED_PRECONDITION when a row of the output table falls outside the
// partition, naming how many and the partition column(s) of the first.
absl::Status CheckInside(Connection* conn, const DatasetSpec& dataset,
                         const std::string& partition, const std::string& out,
                         const Membership& member, const Params& values) {
  const Dialect& d = conn->dialect();
  const std::string col = Dialect::Quote(dataset.partition->column);
  // Whether any row is outside first (the common answer, no): the count
  // and the first such row only when one is.
  ASSIGN_OR_RETURN(
      Result any,
      conn->Exec(absl::StrCat("SELECT 1 FROM ", out, " WHERE (",
                              member.Condition(1), ") IS NOT TRUE LIMIT 1"),
                 values));
  if (any.rows.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(
      Result outside,
      conn->Exec(
          absl::StrCat(
              "SELECT COUNT(*) OVER (), ", d.QuoteValue(col), ", ",
              dataset.two_dimensional()
                  ? d.QuoteValue(Dialect::Quote(dataset.partition->key_column))
                  : std::string("NULL"),
              " FROM ", out, " WHERE (", member.Condition(1),
              ") IS NOT TRUE ORDER BY ", col, " NULLS LAST LIMIT 1"),
          values));
  if (outside.rows.empty()) return absl::OkStatus();
  const Row& row = outside.rows[0];
  auto text = [](const Cell& c) {
    return c.null() ? std::string("NULL") : c.text;
  };
  return absl::FailedPreconditionError(absl::StrCat(
      row[0].text, " rows of ", dataset.name, " fall outside partition ",
      partition, " (e.g. ", dataset.partition->column, "=", text(row[1]),
      dataset.two_dimensional()
          ? absl::StrCat(", ", dataset.partition->key_column, "=", text(row[2]))
          : "",
      ")"));
}

// The fingerprint of each input as the transform read it: a pinned input's
// snapshot (computed once per job), the rest of a whole input through the
// job's view of it or its published table, a partition of an input through
// its membership. An input read from its published table (neither
// recomputed nor pinned by the job) whose change signal is known and
// unchanged since its fingerprint was cached is not read again
// (change_signal.h); one hashed under a known signal goes to `to_cache`,
// one without a known signal to `unsignalled`.
absl::StatusOr<std::vector<InputFingerprint>> InputFingerprints(
    Connection* conn, const JobRegistry::Job& job,
    const std::vector<InputRef>& inputs,
    std::map<std::string, InputFingerprint>* new_pins,
    std::vector<SignalledFingerprint>* to_cache,
    std::set<const DatasetSpec*>* unsignalled) {
  const Dialect& d = conn->dialect();
  const JobLayout& layout = job.layout();
  std::vector<InputFingerprint> out;
  std::map<std::string, std::optional<std::string>> epochs;  // by dataset
  for (const InputRef& in : inputs) {
    const DatasetSpec& u = *in.dataset;
    InputFingerprint f;
    f.dataset = u.name;
    const bool pinned = IsPinned(layout, u.name);
    const bool whole = !in.partition.has_value() || !u.partition;
    f.partition = whole ? std::string() : *in.partition;
    if (whole && pinned) {
      if (std::optional<InputFingerprint> kept =
              job.PinnedFingerprint(u.name)) {
        out.push_back(*std::move(kept));
        continue;
      }
    }
    // Read from its published table: the change signal applies.
    const bool published = !pinned && FindItem(layout, u.name) == nullptr;
    std::optional<PartitionSignal> signal;
    if (published) {
      auto it = epochs.find(u.name);
      if (it == epochs.end()) {
        ASSIGN_OR_RETURN(std::optional<std::string> epoch, KnownEpoch(conn, u));
        it = epochs.emplace(u.name, std::move(epoch)).first;
      }
      if (it->second) {
        ASSIGN_OR_RETURN(
            signal, ReadPartitionSignal(conn, u, *it->second, f.partition));
        ASSIGN_OR_RETURN(std::optional<InputFingerprint> cached,
                         CachedFingerprint(conn, u, f.partition, *signal));
        if (cached) {
          out.push_back(*std::move(cached));
          continue;
        }
      } else {
        unsignalled->insert(&u);
      }
    }
    Fingerprint fp;
    if (whole) {
      ASSIGN_OR_RETURN(
          fp, conn->HashRows(
                  ColumnList(u),
                  absl::StrCat("FROM ", pinned ? d.Name(d.Pin(layout.job_id, u))
                                               : Dialect::Quote(u.table))));
      f.fingerprint = fp.ToString();
      f.rows = fp.rows();
      if (pinned) (*new_pins)[u.name] = f;
    } else {
      ASSIGN_OR_RETURN(std::unique_ptr<Membership> member,
                       d.MembershipOf(conn, u, ""));
      ASSIGN_OR_RETURN(Params values, member->Values(f.partition));
      ASSIGN_OR_RETURN(
          fp, conn->HashRows(ColumnList(u),
                             absl::StrCat("FROM ", Dialect::Quote(u.table),
                                          " WHERE ", member->Condition(1)),
                             values));
      f.fingerprint = fp.ToString();
      f.rows = fp.rows();
    }
    if (signal) to_cache->push_back({&u, f, *signal});
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

absl::Status CheckLayout(const Dialect& dialect, const JobLayout& layout) {
  for (const JobLayout::Item& item : layout.items) {
    if (item.dataset == nullptr) {
      return absl::InvalidArgumentError("PrepareJob: item without dataset");
    }
    RETURN_IF_ERROR(CheckWritable(dialect, *item.dataset));
    RETURN_IF_ERROR(CheckItemKeys(item));
    for (const std::string& partition : item.partitions) {
      RETURN_IF_ERROR(CheckPartition(*item.dataset, partition));
    }
  }
  for (const DatasetSpec* pin : layout.pinned) {
    if (pin == nullptr) {
      return absl::InvalidArgumentError("PrepareJob: null pinned dataset");
    }
    RETURN_IF_ERROR(dialect.CheckName(pin->table, "table"));
  }
  return absl::OkStatus();
}

absl::Status PrepareJob(Connection* conn, StagingHooks& hooks,
                        const JobLayout& layout) {
  const Dialect& d = conn->dialect();
  const std::string& job_id = layout.job_id;
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn, TxnMode::kWrite));
  RETURN_IF_ERROR(d.CreateJobSpace(conn, job_id));
  for (const JobLayout::Item& item : layout.items) {
    const DatasetSpec& ds = *item.dataset;
    const Relation stage = d.Stage(job_id, ds.name);
    const std::string parts = d.Name(d.Parts(job_id, ds.name));
    const std::string keys = d.Name(d.Keys(job_id, ds.name));
    ASSIGN_OR_RETURN(std::string defs, d.ColumnDefinitions(ds));
    RETURN_IF_ERROR(conn->Exec(absl::StrCat("CREATE TABLE IF NOT EXISTS ",
                                            d.Name(stage), " (", defs, ")"))
                        .status());
    RETURN_IF_ERROR(hooks.StageTableReady(conn, stage, ds));
    // The partition list, rebuilt on every call: each value with what its
    // membership condition reads beside it.
    ASSIGN_OR_RETURN(std::unique_ptr<Membership> member,
                     d.MembershipOf(conn, ds, ""));
    const std::vector<std::string> list_columns = member->ListColumns();
    RETURN_IF_ERROR(conn->Exec(absl::StrCat("DROP TABLE IF EXISTS ", parts,
                                            d.DropDependents()))
                        .status());
    RETURN_IF_ERROR(
        conn->Exec(absl::StrCat("CREATE TABLE ", parts,
                                " (\"value\" TEXT PRIMARY KEY",
                                list_columns.empty() ? "" : ", ",
                                absl::StrJoin(list_columns, ", "), ")"))
            .status());
    std::vector<std::string> placeholders;
    for (size_t i = 1; i <= list_columns.size() + 1; ++i) {
      placeholders.push_back(d.Placeholder(static_cast<int>(i)));
    }
    const std::string insert_part = absl::StrCat(
        "INSERT INTO ", parts, " VALUES (", absl::StrJoin(placeholders, ", "),
        ") ON CONFLICT DO NOTHING");
    for (const std::string& p : item.partitions) {
      Params values = {p};
      ASSIGN_OR_RETURN(Params listed, member->ListValues(p));
      values.insert(values.end(), listed.begin(), listed.end());
      RETURN_IF_ERROR(conn->Exec(insert_part, values).status());
    }
    // The entity keys, rebuilt on every call too (none: no table).
    RETURN_IF_ERROR(conn->Exec(absl::StrCat("DROP TABLE IF EXISTS ", keys,
                                            d.DropDependents()))
                        .status());
    if (item.keys.empty()) continue;
    RETURN_IF_ERROR(conn->Exec(absl::StrCat("CREATE TABLE ", keys,
                                            " (\"key\" TEXT PRIMARY KEY)"))
                        .status());
    const std::string insert_key =
        absl::StrCat("INSERT INTO ", keys, " (\"key\") VALUES (",
                     d.Placeholder(1), ") ON CONFLICT DO NOTHING");
    for (const std::string& key : item.keys) {
      RETURN_IF_ERROR(conn->Exec(insert_key, {key}).status());
    }
  }
  for (const DatasetSpec* pin : layout.pinned) {
    // A dataset the job recomputes is read from its staging, not pinned.
    if (FindItem(layout, pin->name) != nullptr) continue;
    const Relation snapshot = d.Pin(job_id, *pin);
    ASSIGN_OR_RETURN(bool pinned, conn->Exists(snapshot));
    if (pinned) continue;  // keep the version pinned before a restart
    const Relation table = d.Published(*pin);
    ASSIGN_OR_RETURN(bool exists, conn->Exists(table));
    if (!exists) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot pin ", pin->name, ": table ", pin->table,
                       " does not exist in the warehouse"));
    }
    ASSIGN_OR_RETURN(std::vector<std::string> copy,
                     d.PinStatements(conn, table, snapshot));
    for (const std::string& statement : copy) {
      RETURN_IF_ERROR(conn->Exec(statement).status());
    }
  }
  return Annotate(txn.Commit(), absl::StrCat("preparing job ", job_id));
}

absl::Status CheckTransformOutputs(const DatasetSpec& dataset,
                                   const std::vector<std::string>& outputs) {
  for (const ColumnSpec& c : dataset.columns) {
    bool found = false;
    for (const std::string& o : outputs) {
      found = found || absl::EqualsIgnoreCase(o, c.name);
    }
    if (!found) {
      return absl::FailedPreconditionError(absl::StrCat(
          "transform of ", dataset.name, " does not output contract column ",
          c.name, " (it outputs: ", absl::StrJoin(outputs, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StageResult> TransformPartition(
    Connection* conn, StagingHooks& hooks, const JobRegistry::Job& job,
    const DatasetSpec& dataset, const std::string& partition,
    const std::vector<InputRef>& inputs,
    std::set<const DatasetSpec*>* unsignalled, bool into_group,
    TransformedPartition* transformed) {
  const Dialect& d = conn->dialect();
  const JobLayout& layout = job.layout();
  const std::string& job_id = layout.job_id;
  const std::string what = absl::StrCat("transform of ", dataset.name);
  const std::string cols = ColumnList(dataset);
  const std::string out = d.Name(d.Scratch(kOutTable));
  const JobLayout::Item* item = FindItem(layout, dataset.name);
  // Each phase's time (StageTimings), from the leased connection on.
  Stopwatch phase;
  StageResult result;

  TransformSetup setup;
  setup.job = &job;
  setup.dataset = &dataset;
  setup.inputs = &inputs;
  setup.where =
      absl::StrCat("Stage ", dataset.name, "/", partition, " of ", job_id);
  const std::string& where = setup.where;
  RETURN_IF_ERROR(Annotate(AddSetup(conn, layout, dataset, &setup), where));
  ASSIGN_OR_RETURN(CompiledTransform transform,
                   hooks.OpenTransform(conn, setup));
  const ExtraParameters extra = ExtraParametersOf(dataset);
  for (const std::string& name : transform.parameters) {
    if (std::string problem = ParameterProblem(name, extra); !problem.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(what, ": ", problem));
    }
  }
  ASSIGN_OR_RETURN(Params params,
                   PartitionParameters(dataset, partition, transform.parameters,
                                       extra, item, what));
  ASSIGN_OR_RETURN(std::unique_ptr<Membership> member,
                   d.MembershipOf(conn, dataset, ""));
  ASSIGN_OR_RETURN(Params in_values, member->Values(partition));
  const std::string in_partition = member->Condition(1);
  std::map<std::string, InputFingerprint> new_pins;
  std::vector<SignalledFingerprint> to_cache;
  // A read transaction; writes only the session's objects.
  ASSIGN_OR_RETURN(Transaction read,
                   Transaction::Begin(conn, TxnMode::kSnapshot));
  ASSIGN_OR_RETURN(std::vector<std::string> outputs,
                   hooks.VetTransform(conn, setup, transform, params));
  RETURN_IF_ERROR(CheckTransformOutputs(dataset, outputs));
  // Rows an earlier call left when it failed after its transform.
  RETURN_IF_ERROR(
      Annotate(conn->Exec(absl::StrCat("DELETE FROM ", out)).status(), where));
  absl::Status ran = conn->Exec(absl::StrCat("INSERT INTO ", out, " (", cols,
                                             ") SELECT ", cols, " FROM (\n",
                                             transform.text, "\n) AS _bf_t"),
                                params)
                         .status();
  if (!ran.ok()) {
    return Annotate(ran, absl::StrCat(what, " on partition ", partition));
  }
  if (dataset.partition) {
    RETURN_IF_ERROR(
        CheckInside(conn, dataset, partition, out, *member, in_values));
  }
  if (item != nullptr && !item->keys.empty()) {
    // Only the keys' rows are the transform's to replace; the others stay
    // as published, so staging holds the partition as publishing would
    // leave it.
    const std::string in_keys = d.InKeys(dataset, d.Keys(job_id, dataset.name));
    RETURN_IF_ERROR(Annotate(
        conn->Exec(absl::StrCat("DELETE FROM ", out, " WHERE NOT ", in_keys))
            .status(),
        where));
    const Relation table = d.Published(dataset);
    ASSIGN_OR_RETURN(bool published, conn->Exists(table));
    if (published) {
      RETURN_IF_ERROR(Annotate(
          conn->Exec(absl::StrCat("INSERT INTO ", out, " (", cols, ") SELECT ",
                                  cols, " FROM ", d.Name(table), " WHERE ",
                                  in_partition, " AND NOT ", in_keys),
                     in_values)
              .status(),
          where));
    }
  }
  result.timings.transform = phase.Lap();
  ASSIGN_OR_RETURN(Fingerprint fp,
                   conn->HashRows(cols, absl::StrCat("FROM ", out)));
  result.rows_written = fp.rows();
  result.output_fingerprint = fp.ToString();
  ASSIGN_OR_RETURN(
      result.inputs,
      InputFingerprints(conn, job, inputs, &new_pins, &to_cache, unsignalled));
  result.timings.fingerprint = phase.Lap();
  if (into_group) {
    RETURN_IF_ERROR(Annotate(
        conn->Exec(absl::StrCat("INSERT INTO ", d.Name(d.Scratch(kGroupTable)),
                                " (", cols, ") SELECT ", cols, " FROM ", out))
            .status(),
        where));
  }
  RETURN_IF_ERROR(Annotate(read.Commit(), where));
  transformed->partition = partition;
  transformed->condition = in_partition;
  transformed->values = std::move(in_values);
  transformed->to_cache = std::move(to_cache);
  transformed->new_pins = std::move(new_pins);
  transformed->rows = result.rows_written;
  return result;
}

absl::Status WriteStaged(Connection* conn, StagingHooks& hooks,
                         const JobRegistry::Job& job,
                         const DatasetSpec& dataset, bool from_group,
                         const std::vector<TransformedPartition>& parts) {
  if (parts.empty()) return absl::OkStatus();
  const Dialect& d = conn->dialect();
  const std::string& job_id = job.layout().job_id;
  const std::string cols = ColumnList(dataset);
  const std::string stage = d.Name(d.Stage(job_id, dataset.name));
  const std::string source =
      d.Name(d.Scratch(from_group ? kGroupTable : kOutTable));
  const std::string where =
      parts.size() == 1
          ? absl::StrCat("Stage ", dataset.name, "/", parts[0].partition,
                         " of ", job_id)
          : absl::StrCat("Stage ", parts.size(), " partitions of ",
                         dataset.name, " (", parts.front().partition, " .. ",
                         parts.back().partition, ") of ", job_id);
  ASSIGN_OR_RETURN(Transaction write,
                   Transaction::Begin(conn, TxnMode::kWrite));
  if (from_group) {
    // Every transformed partition's rows, or none of them is written.
    int64_t expected = 0;
    for (const TransformedPartition& p : parts) expected += p.rows;
    ASSIGN_OR_RETURN(Result held,
                     conn->Exec(absl::StrCat("SELECT COUNT(*) FROM ", source)));
    const int64_t found = held.rows.empty() || held.rows[0][0].null()
                              ? -1
                              : std::stoll(held.rows[0][0].text);
    if (found != expected) {
      return absl::AbortedError(absl::StrCat(
          where, ": the session holds ", found, " transformed rows, not ",
          expected, "; the partitions are staged again"));
    }
  }
  for (const TransformedPartition& p : parts) {
    RETURN_IF_ERROR(Annotate(
        hooks.LockPartition(conn, job_id, dataset, p.partition), where));
    RETURN_IF_ERROR(Annotate(
        conn->Exec(absl::StrCat("DELETE FROM ", stage, " WHERE ", p.condition),
                   p.values)
            .status(),
        where));
  }
  RETURN_IF_ERROR(
      Annotate(conn->Exec(absl::StrCat("INSERT INTO ", stage, " (", cols,
                                       ") SELECT ", cols, " FROM ", source))
                   .status(),
               where));
  if (from_group) {
    RETURN_IF_ERROR(Annotate(
        conn->Exec(absl::StrCat("DELETE FROM ", source)).status(), where));
  }
  // The inputs hashed under a known signal, cached with it (read in the
  // same snapshot as their rows).
  for (const TransformedPartition& p : parts) {
    RETURN_IF_ERROR(Annotate(StoreFingerprints(conn, p.to_cache), where));
  }
  RETURN_IF_ERROR(hooks.CheckWarehouse());
  CrashPoint("stage.before_commit");
  RETURN_IF_ERROR(Annotate(write.Commit(), where));
  for (const TransformedPartition& p : parts) {
    for (const auto& [name, f] : p.new_pins) job.KeepPinnedFingerprint(f);
  }
  return absl::OkStatus();
}

absl::Status StagingHooks::PrepareGroupTable(Connection* conn,
                                             const std::string& create) {
  const Dialect& d = conn->dialect();
  RETURN_IF_ERROR(conn->Exec(absl::StrCat("DROP TABLE IF EXISTS ",
                                          d.Name(d.Scratch(kGroupTable))))
                      .status());
  return conn->Exec(create).status();
}

absl::Status PrepareGroupTable(Connection* conn, StagingHooks& hooks,
                               const DatasetSpec& dataset) {
  const Dialect& d = conn->dialect();
  ASSIGN_OR_RETURN(std::string defs, d.ColumnDefinitions(dataset));
  return hooks.PrepareGroupTable(
      conn, absl::StrCat("CREATE TEMP TABLE ", Dialect::Quote(kGroupTable),
                         " (", defs, ")"));
}

absl::StatusOr<StageResult> StagePartition(
    Connection* conn, StagingHooks& hooks, const JobRegistry::Job& job,
    const DatasetSpec& dataset, const std::string& partition,
    const std::vector<InputRef>& inputs,
    std::set<const DatasetSpec*>* unsignalled) {
  TransformedPartition transformed;
  ASSIGN_OR_RETURN(
      StageResult result,
      TransformPartition(conn, hooks, job, dataset, partition, inputs,
                         unsignalled, /*into_group=*/false, &transformed));
  // The short write: replace the partition's staged rows.
  Stopwatch write;
  RETURN_IF_ERROR(WriteStaged(conn, hooks, job, dataset, /*from_group=*/false,
                              {transformed}));
  result.timings.stage_write = write.Elapsed();
  RETURN_IF_ERROR(hooks.CloseTransform(conn, result.rows_written));
  return result;
}

absl::Status ReleasePartitions(Connection* conn, StagingHooks& hooks,
                               const std::string& job_id,
                               const DatasetSpec& dataset,
                               const std::vector<std::string>& partitions) {
  const Dialect& d = conn->dialect();
  const std::string where = absl::StrCat("release of partitions of ",
                                         dataset.name, " from job ", job_id);
  const Relation stage = d.Stage(job_id, dataset.name);
  const Relation parts = d.Parts(job_id, dataset.name);
  ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn, TxnMode::kWrite));
  ASSIGN_OR_RETURN(bool staged, conn->Exists(stage));
  if (staged) {
    ASSIGN_OR_RETURN(std::unique_ptr<Membership> member,
                     d.MembershipOf(conn, dataset, ""));
    const std::string del = absl::StrCat("DELETE FROM ", d.Name(stage),
                                         " WHERE ", member->Condition(1));
    for (const std::string& partition : partitions) {
      ASSIGN_OR_RETURN(Params values, member->Values(partition));
      RETURN_IF_ERROR(Annotate(conn->Exec(del, values).status(), where));
    }
  }
  ASSIGN_OR_RETURN(bool listed, conn->Exists(parts));
  if (listed) {
    const std::string del = absl::StrCat(
        "DELETE FROM ", d.Name(parts), " WHERE \"value\" = ", d.Placeholder(1));
    for (const std::string& partition : partitions) {
      RETURN_IF_ERROR(Annotate(conn->Exec(del, {partition}).status(), where));
    }
  }
  RETURN_IF_ERROR(hooks.CheckWarehouse());
  return Annotate(txn.Commit(), where);
}

}  // namespace backfill::sql
