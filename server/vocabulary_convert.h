// The wire enums of the pipelines' vocabulary: a dataset's grain and kind,
// an upstream edge's partition mapping, a consumer's kind, the unit and the
// source of cost estimates, and what put a version of a partition in place.
//
// The domain keeps these as its own enums (core/) or, for the estimate
// source, as the words the cost estimator writes; the API sends them as
// backfill.v1 enums so that clients switch on values rather than compare
// strings. A value the domain gains before the wire does maps to the
// enum's UNSPECIFIED, never to a wrong value.
//
// Pure functions; thread-safe.

#ifndef BACKFILL_SERVER_VOCABULARY_CONVERT_H_
#define BACKFILL_SERVER_VOCABULARY_CONVERT_H_

#include <string_view>

#include "backfill/v1/backfill.pb.h"
#include "core/model/catalog.h"
#include "core/model/consumer_spec.h"
#include "core/model/job.h"
#include "core/model/partition.h"

namespace backfill {

v1::Grain GrainToProto(Grain grain);
v1::DatasetKind DatasetKindToProto(DatasetKind kind);
v1::PartitionMapping MappingToProto(Mapping mapping);
v1::ConsumerKind ConsumerKindToProto(ConsumerKind kind);
// `source` is a DatasetPlan::estimate_source ("history", "row_counts",
// "mixed"); "" (not estimated) is ESTIMATE_SOURCE_UNSPECIFIED.
v1::EstimateSource EstimateSourceToProto(std::string_view source);
v1::VersionKind VersionKindToProto(LineageAction action);

}  // namespace backfill

#endif  // BACKFILL_SERVER_VOCABULARY_CONVERT_H_
