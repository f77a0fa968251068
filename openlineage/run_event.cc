#include "openlineage/run_event.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/partition_layout.h"
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
                      ":facet:BackfilldBackfillRunFacet");
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
  }
  return "OTHER";
}

std::optional<Outcome> OutcomeOf(JobState from, JobState to) {
  auto both = [](EventType type) { return Outcome{type, type}; };
  switch (to) {
    case JobState::kRunning:
      if (from == JobState::kQueued) return both(EventType::kStart);
      return both(EventType::kRunning);
    case JobState::kSucceeded:
      return both(EventType::kComplete);
    case JobState::kDownstreamUnhealthy:
      return Outcome{EventType::kFail, EventType::kComplete};
    case JobState::kFailed:
    case JobState::kValidationFailed:
      return both(EventType::kFail);
    case JobState::kCancelled:
    case JobState::kRolledBack:
      return both(EventType::kAbort);
    default:
      return std::nullopt;
  }
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
    Struct* parent = AddFacet(facets, "parent", producer, kParentSchemaUrl);
    SetString(SetStruct(parent, "run"), "runId", job_run_id);
    Struct* parent_job = SetStruct(parent, "job");
    SetString(parent_job, "namespace", config.job_namespace);
    SetString(parent_job, "name", kJobName);
    AddBackfillFacet(facets, config, producer, job, to, message);

    if (const DatasetSpec* spec = catalog.Find(plan.dataset)) {
      ListValue* inputs = SetList(&event, "inputs");
      for (const UpstreamEdge& edge : spec->upstream) {
        Struct* input = Append(inputs);
        SetString(input, "namespace", config.dataset_namespace);
        SetString(input, "name", table_of(edge.dataset));
      }
    }
    Struct* output = Append(SetList(&event, "outputs"));
    SetString(output, "namespace", config.dataset_namespace);
    SetString(output, "name", table_of(plan.dataset));
    if (outcome.datasets == EventType::kComplete) {
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

}  // namespace backfill::openlineage
