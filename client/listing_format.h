// listing_format: backfillctl's tables of lists (`datasets`, `list`,
// `partitions`):
//   FormatDatasets   table NAME KIND GRAIN TABLE UPSTREAM DOWNSTREAM
//                    ENTITY KEY, then the downstream consumers
//   FormatBackfills  table ID STATE DATASET PARTITIONS COST EST/ACTUAL
//                    CREATED REASON
//   FormatPartitions table DATASET PARTITION STATE ATTEMPTS ROWS SECONDS
//                    UPDATED REASON ERROR, then the number of partitions
//
// Pure functions from messages to text; thread-safe.

#ifndef BACKFILL_CLIENT_LISTING_FORMAT_H_
#define BACKFILL_CLIENT_LISTING_FORMAT_H_

#include <string>

#include "backfill/v1/backfill.pb.h"

namespace backfill {
namespace cli {

std::string FormatDatasets(const v1::ListDatasetsResponse& response);
std::string FormatBackfills(const v1::ListBackfillsResponse& response);
// The partitions of a job (every page merged into one response).
std::string FormatPartitions(const v1::ListPartitionsResponse& response);

}  // namespace cli
}  // namespace backfill

#endif  // BACKFILL_CLIENT_LISTING_FORMAT_H_
