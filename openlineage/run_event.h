// OpenLineage RunEvents of backfill jobs: what each job state change means
// for the job's OpenLineage runs, and the events' JSON text.
//
// The runs of one backfill job:
//  * the job's run: OpenLineage job `backfill` in the configured namespace,
//    run id NameBasedUuid(kRunIdNamespace, "<store id>/<job id>"); no
//    inputs or outputs of its own;
//  * one run per dataset of the job's plan: OpenLineage job
//    `backfill/<dataset>`, run id NameBasedUuid(kRunIdNamespace,
//    "<store id>/<job id>/<dataset>"), with the `parent` facet naming the
//    job's run; inputs are the dataset's upstream tables, the output its
//    table, named in the warehouse's dataset namespace (OpenLineage's
//    physical naming), each with the standard `symlinks` facet naming the
//    backfilld dataset: namespace the jobs' namespace, type "DATASET";
//  * once the job is rolled back, the rollback's runs (BuildRollbackEvents):
//    the same job names, run ids of "<store id>/<job id>/rollback[/<dataset>]",
//    each with a `parent` facet naming the run it undoes.
// Every run carries the `nominalTime` facet (the first partition's start
// to the last one's end, for time-partitioned datasets; the job's run: its
// target's) and the custom `backfilld_backfill` facet (job id, state,
// reason, ticket, requested_by, message); a FAIL event also the standard
// `errorMessage` facet (the change's message). The store id makes run ids
// unique across daemons; job id and dataset make them stable across
// restarts, so a terminal event sent after a restart closes the run its
// START opened.
//
// JSON is built as a google.protobuf.Struct and printed by protobuf's JSON
// printer. Stateless free functions; thread-safe.

#ifndef BACKFILL_OPENLINEAGE_RUN_EVENT_H_
#define BACKFILL_OPENLINEAGE_RUN_EVENT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "openlineage/uuid.h"

namespace backfill::openlineage {

// The RunEvent schema this producer follows, and the facets' schemas.
inline constexpr char kRunEventSchemaUrl[] =
    "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent";
inline constexpr char kNominalTimeSchemaUrl[] =
    "https://openlineage.io/spec/facets/1-0-1/NominalTimeRunFacet.json"
    "#/$defs/NominalTimeRunFacet";
inline constexpr char kParentSchemaUrl[] =
    "https://openlineage.io/spec/facets/1-0-1/ParentRunFacet.json"
    "#/$defs/ParentRunFacet";
inline constexpr char kOutputStatisticsSchemaUrl[] =
    "https://openlineage.io/spec/facets/1-0-2/"
    "OutputStatisticsOutputDatasetFacet.json"
    "#/$defs/OutputStatisticsOutputDatasetFacet";
inline constexpr char kSymlinksSchemaUrl[] =
    "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json"
    "#/$defs/SymlinksDatasetFacet";
inline constexpr char kErrorMessageSchemaUrl[] =
    "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json"
    "#/$defs/ErrorMessageRunFacet";
// The errorMessage facet's programmingLanguage: backfilld's.
inline constexpr char kProgrammingLanguage[] = "C++";
// The type of the symlink naming a dataset by its backfilld name.
inline constexpr char kSymlinkType[] = "DATASET";
// The custom run facet's key ({prefix}_{name}, as the spec asks of custom
// facets) and its schema, shipped as docs/openlineage/ in the repository.
inline constexpr char kBackfillFacetKey[] = "backfilld_backfill";
// The producer URI of events and facets: urn:backfilld:<version>. A URN,
// not an address: backfilld claims no web location it does not control.
std::string ProducerUri(const std::string& version);
// The custom facet's _schemaURL for `version`, a JSON pointer into the
// schema document as the spec asks:
// urn:backfilld:<version>:facet:BackfilldBackfillRunFacet
// #/$defs/BackfilldBackfillRunFacet. The document's $id is the part before
// the '#'; it ships in the repository as docs/openlineage/ (a URN names it:
// it is not fetched from anywhere).
std::string BackfillFacetSchemaUrl(const std::string& version);

// The namespace of run ids: NameBasedUuid(RFC 4122's URL namespace,
// "urn:backfilld:openlineage:run") = 6ceacff3-56ee-5261-b4df-51eb7046a6c4.
inline constexpr Uuid kRunIdNamespace = {0x6c, 0xea, 0xcf, 0xf3, 0x56, 0xee,
                                         0x52, 0x61, 0xb4, 0xdf, 0x51, 0xeb,
                                         0x70, 0x46, 0xa6, 0xc4};

std::string JobRunId(const std::string& store_id, const std::string& job_id);
std::string DatasetRunId(const std::string& store_id, const std::string& job_id,
                         const std::string& dataset);
// The rollback's runs: "<store id>/<job id>/rollback[/<dataset>]".
std::string RollbackRunId(const std::string& store_id,
                          const std::string& job_id);
std::string RollbackDatasetRunId(const std::string& store_id,
                                 const std::string& job_id,
                                 const std::string& dataset);

// The OpenLineage job names: "backfill" and "backfill/<dataset>".
inline constexpr char kJobName[] = "backfill";
std::string DatasetJobName(const std::string& dataset);

enum class EventType { kStart, kRunning, kComplete, kAbort, kFail, kOther };
const char* EventTypeName(EventType type);  // "START", ...

// Where a job's runs stand before a state change, read from the job's
// history (its audit events up to the change):
//   kNotStarted  the job never moved to RUNNING: no START was sent, the
//                receiver knows no run;
//   kOpen        it did (START sent), and has not ended since;
//   kClosed      it ended after it started: the terminal event was sent.
// `reported_outcome`: the job reached SUCCEEDED or DOWNSTREAM_UNHEALTHY
// before (its publication was reported with outputStatistics).
struct RunHistory {
  enum class Phase { kNotStarted, kOpen, kClosed };
  Phase phase = Phase::kNotStarted;
  bool reported_outcome = false;
};
// The history after the audit events `events` (oldest first).
RunHistory HistoryOf(const std::vector<AuditEvent>& events);

// What a job's move from `from` to `to` sends, given where its runs stood
// before: the event of the job's run and of each dataset's run. Every run
// gets exactly one START and at most one terminal event (COMPLETE, FAIL,
// ABORT), as the spec asks:
//   to RUNNING                    START the first time; RUNNING when the
//                                 run is open (resume, validation sending
//                                 partitions back); OTHER once closed
//                                 (retry of a failed job)
//   to SUCCEEDED                  COMPLETE
//   to DOWNSTREAM_UNHEALTHY       job FAIL, datasets COMPLETE (their
//                                 partitions are published)
//   to FAILED, VALIDATION_FAILED  FAIL
//   to CANCELLED                  ABORT
//   to CONFIRMING from SUCCEEDED or DOWNSTREAM_UNHEALTHY (`confirm`)
//                                 OTHER
//   to ROLLED_BACK                nothing on these runs (they stay as they
//                                 ended): the rollback is a run of its own
//                                 (`rollback`, see BuildRollbackEvents)
// A terminal state reached by a run already closed sends OTHER (the facet
// carries the new state); one reached by a job that never started sends
// nothing (there is no run to close). Other moves (validating, approval,
// publishing, the first confirming, pausing, queueing) send nothing.
struct Outcome {
  EventType job = EventType::kStart;
  EventType datasets = EventType::kStart;
  // Dataset events carry outputStatistics: the first report of the job's
  // publication.
  bool output_statistics = false;
  // The change is a rollback: BuildRollbackEvents, not BuildRunEvents.
  bool rollback = false;
};
std::optional<Outcome> OutcomeOf(JobState from, JobState to,
                                 const RunHistory& before);
// Whether the move can send anything, whatever the history: the cheap test
// the observer callback applies before queueing a change.
bool MaySendEvents(JobState from, JobState to);

struct EventConfig {
  std::string job_namespace = "backfilld";
  // The warehouse as an OpenLineage dataset namespace, e.g.
  // "sqlite://db1.example/srv/backfill/warehouse.db" (WarehouseNamespace)
  // or "postgres://db.internal:5432".
  std::string dataset_namespace;
  // What precedes a table's name in its dataset name: "" for SQLite (the
  // table alone), "{database}.{schema}." for PostgreSQL, as OpenLineage's
  // naming spec asks (PostgresNamePrefix, emitter.h).
  std::string dataset_name_prefix;
  std::string store_id;  // the state store's id (StoreInfo::store_id)
  std::string version;   // backfilld's version, in the producer URI
};

// The events of one job state change, as JSON text: the job's run first,
// then one per dataset of the plan, in plan order. `job` is read after the
// change (its request and plan; its state may have moved on: `to` and
// `message` are the change's own), `tasks` its tasks: COMPLETE events of
// dataset runs carry outputStatistics with the rows the job published into
// the dataset. Datasets no longer in `catalog` are named by their dataset
// name, without inputs.
absl::StatusOr<std::vector<std::string>> BuildRunEvents(
    const EventConfig& config, const Catalog& catalog, const Job& job,
    const std::vector<PartitionTask>& tasks, JobState to,
    const std::string& message, const Outcome& outcome, absl::Time event_time);

// The events of a rollback of `job` (moved to ROLLED_BACK with `message`):
// the rollback is a run of its own, one for the job and one per dataset of
// its plan, with run ids derived from "<store id>/<job id>/rollback" and
// "<store id>/<job id>/rollback/<dataset>", the same job names as the
// job's runs, and a `parent` facet naming the run it undoes (the job's run,
// or the dataset's run). Each gets START then COMPLETE; a dataset run's
// output is the dataset it restored. Order: the job's START, the datasets'
// STARTs, the datasets' COMPLETEs, the job's COMPLETE.
absl::StatusOr<std::vector<std::string>> BuildRollbackEvents(
    const EventConfig& config, const Catalog& catalog, const Job& job,
    const std::string& message, absl::Time event_time);

// RFC 3339 in UTC with milliseconds: "2025-03-01T07:00:00.000Z".
std::string Rfc3339(absl::Time t);

// The scope of `partitions` of a dataset of `layout` as [start, end) times;
// nullopt for keys, unpartitioned datasets and no partitions.
struct TimeRange {
  absl::Time start;
  absl::Time end;
};
std::optional<TimeRange> NominalRange(
    const PartitionLayout& layout, const std::vector<std::string>& partitions);

}  // namespace backfill::openlineage

#endif  // BACKFILL_OPENLINEAGE_RUN_EVENT_H_
