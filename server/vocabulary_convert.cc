#include "server/vocabulary_convert.h"

#include "core/plan/cost_estimator.h"

namespace backfill {

v1::Grain GrainToProto(Grain grain) {
  switch (grain) {
    case Grain::kNone:
      return v1::GRAIN_NONE;
    case Grain::kHour:
      return v1::GRAIN_HOUR;
    case Grain::kDay:
      return v1::GRAIN_DAY;
    case Grain::kMonth:
      return v1::GRAIN_MONTH;
    case Grain::kKey:
      return v1::GRAIN_KEY;
  }
  return v1::GRAIN_UNSPECIFIED;
}

v1::DatasetKind DatasetKindToProto(DatasetKind kind) {
  switch (kind) {
    case DatasetKind::kSource:
      return v1::DATASET_KIND_SOURCE;
    case DatasetKind::kDerived:
      return v1::DATASET_KIND_DERIVED;
  }
  return v1::DATASET_KIND_UNSPECIFIED;
}

v1::PartitionMapping MappingToProto(Mapping mapping) {
  switch (mapping) {
    case Mapping::kIdentity:
      return v1::PARTITION_MAPPING_IDENTITY;
    case Mapping::kAll:
      return v1::PARTITION_MAPPING_ALL;
    case Mapping::kRollup:
      return v1::PARTITION_MAPPING_ROLLUP;
    case Mapping::kLookback:
      return v1::PARTITION_MAPPING_LOOKBACK;
  }
  return v1::PARTITION_MAPPING_UNSPECIFIED;
}

v1::ConsumerKind ConsumerKindToProto(ConsumerKind kind) {
  switch (kind) {
    case ConsumerKind::kHttp:
      return v1::CONSUMER_KIND_HTTP;
    case ConsumerKind::kCommand:
      return v1::CONSUMER_KIND_COMMAND;
  }
  return v1::CONSUMER_KIND_UNSPECIFIED;
}

v1::EstimateSource EstimateSourceToProto(std::string_view source) {
  if (source == kEstimateFromHistory) return v1::ESTIMATE_SOURCE_HISTORY;
  if (source == kEstimateFromRowCounts) return v1::ESTIMATE_SOURCE_ROW_COUNTS;
  if (source == kEstimateMixed) return v1::ESTIMATE_SOURCE_MIXED;
  return v1::ESTIMATE_SOURCE_UNSPECIFIED;
}

v1::VersionKind VersionKindToProto(LineageAction action) {
  switch (action) {
    case LineageAction::kPublish:
      return v1::VERSION_KIND_BACKFILL;
    case LineageAction::kRollback:
      return v1::VERSION_KIND_ROLLBACK;
  }
  return v1::VERSION_KIND_UNSPECIFIED;
}

}  // namespace backfill
