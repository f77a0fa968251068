#include "openlineage/run_event.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/governance/audit_log.h"
#include "core/model/partition_layout.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace backfill::openlineage {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

void SetString(Struct* s, const std::string& key, const std::string& value) {
  (*s->mutable_fields())[key].set_string_value(value);
}
void SetNumber(Struct* s, const std::string& key, double value) {
  (*s->mutable_fields())[key].set_number_value(value);
}
Struct* SetStruct(Struct* s, const std::string& key) {
  return (*s->mutable_fields())[key].mutable_struct_value();
}
ListValue* SetList(Struct* s, const std::string& key) {
  return (*s->mutable_fields())[key].mutable_list_value();
}
Struct* Append(ListValue* list) {
  return list->add_values()->mutable_struct_value();
}

// A facet: _producer and _schemaURL first (the spec's BaseFacet).
Struct* AddFacet(Struct* facets, const std::string& key,
                 const std::string& producer, const std::string& schema) {
  Struct* facet = SetStruct(facets, key);
  SetString(facet, "_producer", producer);
  SetString(facet, "_schemaURL", schema);
  return facet;
}

void AddNominalTime(Struct* facets, const std::string& producer,
                    const std::optional<TimeRange>& range) {
  if (!range) return;
  Struct* facet =
      AddFacet(facets, "nominalTime", producer, kNominalTimeSchemaUrl);
  SetString(facet, "nominalStartTime", Rfc3339(range->start));
  SetString(facet, "nominalEndTime", Rfc3339(range->end));
}

void AddBackfillFacet(Struct* facets, const EventConfig& config,
                      const std::string& producer, const Job& job, JobState to,
                      const std::string& message) {
  Struct* facet = AddFacet(facets, kBackfillFacetKey, producer,
                           BackfillFacetSchemaUrl(config.version));
  SetString(facet, "jobId", job.id);
  SetString(facet, "state", JobStateName(to));
  SetString(facet, "reason", job.request.reason);
  SetString(facet, "ticket", job.request.ticket);
  SetString(facet, "requestedBy", job.request.requested_by);
  SetString(facet, "message", message);
}

// The standard errorMessage facet of a FAIL event: the change's message,
// or the state the run failed with when the change has none (the facet
// requires a message).
void AddErrorMessage(Struct* facets, const std::string& producer,
                     EventType type, JobState to, const std::string& message) {
  if (type != EventType::kFail) return;
  Struct* facet =
      AddFacet(facets, "errorMessage", producer, kErrorMessageSchemaUrl);
  SetString(facet, "message",
            message.empty()
                ? absl::StrCat("the backfill ended ", JobStateName(to))
                : message);
  SetString(facet, "programmingLanguage", kProgrammingLanguage);
}

void AddParent(Struct* facets, const EventConfig& config,
               const std::string& producer, const std::string& run_id,
               const std::string& job_name) {
  Struct* parent = AddFacet(facets, "parent", producer, kParentSchemaUrl);
  SetString(SetStruct(parent, "run"), "runId", run_id);
  Struct* parent_job = SetStruct(parent, "job");
  SetString(parent_job, "namespace", config.job_namespace);
  SetString(parent_job, "name", job_name);
}

// A dataset of `list`: named by its table in the warehouse's namespace,
// with the standard `symlinks` facet naming the backfilld dataset (in the
// jobs' namespace).
Struct* AddDataset(ListValue* list, const EventConfig& config,
                   const std::string& producer, const std::string& table,
                   const std::string& dataset) {
  Struct* entry = Append(list);
  SetString(entry, "namespace", config.dataset_namespace);
  SetString(entry, "name", absl::StrCat(config.dataset_name_prefix, table));
  Struct* symlinks = AddFacet(SetStruct(entry, "facets"), "symlinks", producer,
                              kSymlinksSchemaUrl);
  Struct* identifier = Append(SetList(symlinks, "identifiers"));
  SetString(identifier, "namespace", config.job_namespace);
  SetString(identifier, "name", dataset);
  SetString(identifier, "type", kSymlinkType);
  return entry;
}

// The event's envelope: eventType, eventTime, producer, schemaURL, run
// (runId, empty facets), job.
Struct Envelope(const EventConfig& config, const std::string& producer,
                EventType type, absl::Time event_time,
                const std::string& run_id, const std::string& job_name) {
  Struct event;
  SetString(&event, "eventType", EventTypeName(type));
  SetString(&event, "eventTime", Rfc3339(event_time));
  SetString(&event, "producer", producer);
  SetString(&event, "schemaURL", kRunEventSchemaUrl);
  Struct* run = SetStruct(&event, "run");
  SetString(run, "runId", run_id);
  SetStruct(run, "facets");
  Struct* ol_job = SetStruct(&event, "job");
  SetString(ol_job, "namespace", config.job_namespace);
  SetString(ol_job, "name", job_name);
  SetList(&event, "inputs");
  SetList(&event, "outputs");
  return event;
}

Struct* RunFacets(Struct* event) {
  return (*event->mutable_fields())["run"]
      .mutable_struct_value()
      ->mutable_fields()
      ->at("facets")
      .mutable_struct_value();
}

absl::StatusOr<std::string> ToJson(const Struct& event) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  auto status =
      google::protobuf::util::MessageToJsonString(event, &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print an OpenLineage event as JSON: ",
                     std::string(status.message())));
  }
  return json;
}

absl::StatusOr<absl::Time> ParseBound(const std::string& text) {
  absl::Time t;
  std::string error;
  if (absl::ParseTime("%Y-%m-%d %H:%M:%S", text, absl::UTCTimeZone(), &t,
                      &error) ||
      absl::ParseTime("%Y-%m-%d", text, absl::UTCTimeZone(), &t, &error)) {
    return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("partition bound \"", text, "\" is not a time: ", error));
}

}  // namespace

std::string ProducerUri(const std::string& version) {
  return absl::StrCat("urn:backfilld:", version);
}

std::string BackfillFacetSchemaUrl(const std::string& version) {
  return absl::StrCat("urn:backfilld:", version,
                      ":facet:BackfilldBackfillRunFacet"
                      "#/$defs/BackfilldBackfillRunFacet");
}

std::string JobRunId(const std::string& store_id, const std::string& job_id) {
  return FormatUuid(
      NameBasedUuid(kRunIdNamespace, absl::StrCat(store_id, "/", job_id)));
}

std::string DatasetRunId(const std::string& store_id, const std::string& job_id,
                         const std::string& dataset) {
  return FormatUuid(NameBasedUuid(
      kRunIdNamespace, absl::StrCat(store_id, "/", job_id, "/", dataset)));
}

std::string RollbackRunId(const std::string& store_id,
                          const std::string& job_id) {
  return FormatUuid(NameBasedUuid(
      kRunIdNamespace, absl::StrCat(store_id, "/", job_id, "/rollback")));
}

std::string RollbackDatasetRunId(const std::string& store_id,
                                 const std::string& job_id,
                                 const std::string& dataset) {
  return FormatUuid(NameBasedUuid(
      kRunIdNamespace,
      absl::StrCat(store_id, "/", job_id, "/rollback/", dataset)));
}

std::string DatasetJobName(const std::string& dataset) {
  return absl::StrCat(kJobName, "/", dataset);
}

const char* EventTypeName(EventType type) {
  switch (type) {
    case EventType::kStart:
      return "START";
    case EventType::kRunning:
      return "RUNNING";
    case EventType::kComplete:
      return "COMPLETE";
    case EventType::kAbort:
      return "ABORT";
    case EventType::kFail:
      return "FAIL";
    case EventType::kOther:
      return "OTHER";
  }
  return "OTHER";
}

RunHistory HistoryOf(const std::vector<AuditEvent>& events) {
  RunHistory history;
  for (const AuditEvent& event : events) {
    absl::StatusOr<JobState> to = ParseJobState(event.to_state);
    if (!to.ok()) continue;
    if (*to == JobState::kRunning &&
        history.phase == RunHistory::Phase::kNotStarted) {
      history.phase = RunHistory::Phase::kOpen;
    } else if (IsTerminal(*to) && history.phase == RunHistory::Phase::kOpen) {
      history.phase = RunHistory::Phase::kClosed;
    }
  }
  history.reported_outcome = EndedAConfirmation(events);
  return history;
}

bool MaySendEvents(JobState from, JobState to) {
  switch (to) {
    case JobState::kRunning:
    case JobState::kRolledBack:
      return true;
    case JobState::kConfirming:
      return from == JobState::kSucceeded ||
             from == JobState::kDownstreamUnhealthy;
    default:
      return IsTerminal(to);
  }
}

std::optional<Outcome> OutcomeOf(JobState from, JobState to,
                                 const RunHistory& before) {
  using Phase = RunHistory::Phase;
  if (!MaySendEvents(from, to)) return std::nullopt;
  auto both = [](EventType type) { return Outcome{type, type}; };
  if (to == JobState::kRolledBack) {
    Outcome rollback = both(EventType::kComplete);
    rollback.rollback = true;
    return rollback;
  }
  if (before.phase == Phase::kNotStarted) {
    if (to == JobState::kRunning) return both(EventType::kStart);
    return std::nullopt;  // never started: no run to report on
  }
  std::optional<Outcome> outcome;
  if (before.phase == Phase::kClosed) {
    outcome = both(EventType::kOther);
  } else if (to == JobState::kRunning || to == JobState::kConfirming) {
    outcome = both(EventType::kRunning);
  } else if (to == JobState::kSucceeded) {
    outcome = both(EventType::kComplete);
  } else if (to == JobState::kDownstreamUnhealthy) {
    outcome = Outcome{EventType::kFail, EventType::kComplete};
  } else if (to == JobState::kCancelled) {
    outcome = both(EventType::kAbort);
  } else {  // FAILED, VALIDATION_FAILED
    outcome = both(EventType::kFail);
  }
  outcome->output_statistics =
      (to == JobState::kSucceeded || to == JobState::kDownstreamUnhealthy) &&
      !before.reported_outcome;
  return outcome;
}

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

std::optional<TimeRange> NominalRange(
    const PartitionLayout& layout, const std::vector<std::string>& partitions) {
  if (!IsTimeGrain(layout.grain) || partitions.empty()) return std::nullopt;
  std::optional<TimeRange> range;
  for (const std::string& partition : partitions) {
    absl::StatusOr<PartitionBounds> bounds = BoundsOf(layout, partition);
    if (!bounds.ok()) return std::nullopt;
    absl::StatusOr<absl::Time> start = ParseBound(bounds->start);
    absl::StatusOr<absl::Time> end = ParseBound(bounds->end);
    if (!start.ok() || !end.ok()) return std::nullopt;
    if (!range) {
      range = TimeRange{*start, *end};
    } else {
      range->start = std::min(range->start, *start);
      range->end = std::max(range->end, *end);
    }
  }
  return range;
}

absl::StatusOr<std::vector<std::string>> BuildRunEvents(
    const EventConfig& config, const Catalog& catalog, const Job& job,
    const std::vector<PartitionTask>& tasks, JobState to,
    const std::string& message, const Outcome& outcome, absl::Time event_time) {
  const std::string producer = ProducerUri(config.version);
  const std::string job_run_id = JobRunId(config.store_id, job.id);
  std::map<std::string, int64_t> published_rows;
  for (const PartitionTask& task : tasks) {
    if (task.state == TaskState::kPublished) {
      published_rows[task.dataset] += task.rows_written;
    }
  }
  auto range_of = [&catalog](const DatasetPlan& plan) {
    const DatasetSpec* spec = catalog.Find(plan.dataset);
    return spec == nullptr ? std::nullopt
                           : NominalRange(spec->layout(), plan.partitions);
  };
  auto table_of = [&catalog](const std::string& dataset) {
    const DatasetSpec* spec = catalog.Find(dataset);
    return spec == nullptr ? dataset : spec->table;
  };

  std::vector<std::string> events;
  // The job's run.
  {
    Struct event = Envelope(config, producer, outcome.job, event_time,
                            job_run_id, kJobName);
    Struct* facets = RunFacets(&event);
    for (const DatasetPlan& plan : job.plan.datasets) {
      if (plan.dataset == job.request.dataset) {
        AddNominalTime(facets, producer, range_of(plan));
      }
    }
    AddBackfillFacet(facets, config, producer, job, to, message);
    AddErrorMessage(facets, producer, outcome.job, to, message);
    absl::StatusOr<std::string> json = ToJson(event);
    if (!json.ok()) return json.status();
    events.push_back(*std::move(json));
  }
  // One run per dataset.
  for (const DatasetPlan& plan : job.plan.datasets) {
    Struct event = Envelope(config, producer, outcome.datasets, event_time,
                            DatasetRunId(config.store_id, job.id, plan.dataset),
                            DatasetJobName(plan.dataset));
    Struct* facets = RunFacets(&event);
    AddNominalTime(facets, producer, range_of(plan));
    AddParent(facets, config, producer, job_run_id, kJobName);
    AddBackfillFacet(facets, config, producer, job, to, message);
    AddErrorMessage(facets, producer, outcome.datasets, to, message);

    if (const DatasetSpec* spec = catalog.Find(plan.dataset)) {
      ListValue* inputs = SetList(&event, "inputs");
      for (const UpstreamEdge& edge : spec->upstream) {
        AddDataset(inputs, config, producer, table_of(edge.dataset),
                   edge.dataset);
      }
    }
    Struct* output = AddDataset(SetList(&event, "outputs"), config, producer,
                                table_of(plan.dataset), plan.dataset);
    if (outcome.output_statistics) {
      Struct* stats =
          AddFacet(SetStruct(output, "outputFacets"), "outputStatistics",
                   producer, kOutputStatisticsSchemaUrl);
      SetNumber(stats, "rowCount",
                static_cast<double>(published_rows[plan.dataset]));
    }
    absl::StatusOr<std::string> json = ToJson(event);
    if (!json.ok()) return json.status();
    events.push_back(*std::move(json));
  }
  return events;
}

absl::StatusOr<std::vector<std::string>> BuildRollbackEvents(
    const EventConfig& config, const Catalog& catalog, const Job& job,
    const std::string& message, absl::Time event_time) {
  const std::string producer = ProducerUri(config.version);
  auto range_of = [&catalog](const DatasetPlan& plan) {
    const DatasetSpec* spec = catalog.Find(plan.dataset);
    return spec == nullptr ? std::nullopt
                           : NominalRange(spec->layout(), plan.partitions);
  };
  // The job's rollback run.
  auto job_event = [&](EventType type) {
    Struct event = Envelope(config, producer, type, event_time,
                            RollbackRunId(config.store_id, job.id), kJobName);
    Struct* facets = RunFacets(&event);
    for (const DatasetPlan& plan : job.plan.datasets) {
      if (plan.dataset == job.request.dataset) {
        AddNominalTime(facets, producer, range_of(plan));
      }
    }
    AddParent(facets, config, producer, JobRunId(config.store_id, job.id),
              kJobName);
    AddBackfillFacet(facets, config, producer, job, JobState::kRolledBack,
                     message);
    return ToJson(event);
  };
  // A dataset's rollback run: its output is the dataset it restored.
  auto dataset_event = [&](EventType type, const DatasetPlan& plan) {
    Struct event =
        Envelope(config, producer, type, event_time,
                 RollbackDatasetRunId(config.store_id, job.id, plan.dataset),
                 DatasetJobName(plan.dataset));
    Struct* facets = RunFacets(&event);
    AddNominalTime(facets, producer, range_of(plan));
    AddParent(facets, config, producer,
              DatasetRunId(config.store_id, job.id, plan.dataset),
              DatasetJobName(plan.dataset));
    AddBackfillFacet(facets, config, producer, job, JobState::kRolledBack,
                     message);
    const DatasetSpec* spec = catalog.Find(plan.dataset);
    AddDataset(SetList(&event, "outputs"), config, producer,
               spec == nullptr ? plan.dataset : spec->table, plan.dataset);
    return ToJson(event);
  };

  std::vector<std::string> events;
  auto add = [&events](absl::StatusOr<std::string> json) {
    if (!json.ok()) return json.status();
    events.push_back(*std::move(json));
    return absl::OkStatus();
  };
  if (absl::Status s = add(job_event(EventType::kStart)); !s.ok()) return s;
  for (EventType type : {EventType::kStart, EventType::kComplete}) {
    for (const DatasetPlan& plan : job.plan.datasets) {
      if (absl::Status s = add(dataset_event(type, plan)); !s.ok()) return s;
    }
  }
  if (absl::Status s = add(job_event(EventType::kComplete)); !s.ok()) return s;
  return events;
}

}  // namespace backfill::openlineage
