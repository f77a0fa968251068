#include "server/freshness_convert.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/error_details.h"
#include "core/governance/page_token.h"
#include "server/proto_convert.h"
#include "server/vocabulary_convert.h"

namespace backfill {
namespace {

std::optional<Freshness> FreshnessFromProto(int value) {
  switch (value) {
    case v1::PARTITION_FRESHNESS_CURRENT:
      return Freshness::kCurrent;
    case v1::PARTITION_FRESHNESS_STALE:
      return Freshness::kStale;
    case v1::PARTITION_FRESHNESS_DUE:
      return Freshness::kDue;
    case v1::PARTITION_FRESHNESS_FROZEN:
      return Freshness::kFrozen;
    default:
      return std::nullopt;
  }
}

v1::PartitionFreshness FreshnessToProto(Freshness freshness) {
  switch (freshness) {
    case Freshness::kCurrent:
      return v1::PARTITION_FRESHNESS_CURRENT;
    case Freshness::kStale:
      return v1::PARTITION_FRESHNESS_STALE;
    case Freshness::kDue:
      return v1::PARTITION_FRESHNESS_DUE;
    case Freshness::kFrozen:
      return v1::PARTITION_FRESHNESS_FROZEN;
  }
  return v1::PARTITION_FRESHNESS_UNSPECIFIED;
}

// The filters a token is bound to: the dataset, and the standings asked
// for as a sorted set (their order in the request does not matter).
uint64_t FreshnessFilterHash(const FreshnessQuery& query) {
  std::vector<std::string> only;
  for (Freshness f : query.only) only.push_back(FreshnessName(f));
  std::sort(only.begin(), only.end());
  only.erase(std::unique(only.begin(), only.end()), only.end());
  std::vector<std::string> filters = {query.dataset};
  filters.insert(filters.end(), only.begin(), only.end());
  return FilterHash(PageList::kDatasetPartitions, filters);
}

}  // namespace

absl::StatusOr<FreshnessQuery> FreshnessQueryFromProto(
    const v1::ListDatasetPartitionsRequest& request) {
  FreshnessQuery query;
  if (request.dataset().empty()) {
    return InvalidFieldError("dataset", "DATASET_MISSING",
                             "`dataset` is empty: name a derived dataset "
                             "(`ListDatasets` lists them)");
  }
  query.dataset = request.dataset();
  for (int value : request.freshness()) {
    std::optional<Freshness> parsed = FreshnessFromProto(value);
    if (!parsed) {
      return InvalidFieldError(
          "freshness", "FRESHNESS_FILTER_INVALID",
          absl::StrCat("`freshness`: ", value,
                       " is not a partition freshness (use "
                       "PARTITION_FRESHNESS_ and CURRENT, STALE, DUE or "
                       "FROZEN, not PARTITION_FRESHNESS_UNSPECIFIED)"));
    }
    query.only.push_back(*parsed);
  }
  absl::StatusOr<int> page_size = PageSizeFromProto(
      request.page_size(), kDefaultFreshnessPageSize, kMaxFreshnessPageSize);
  if (!page_size.ok()) return page_size.status();
  query.limit = *page_size;
  if (!request.page_token().empty()) {
    absl::StatusOr<std::string> after =
        DecodePageTokenKey(PageList::kDatasetPartitions, request.page_token(),
                           FreshnessFilterHash(query), "dataset and freshness");
    if (!after.ok()) return after.status();
    query.after = *std::move(after);
  }
  return query;
}

v1::ListDatasetPartitionsResponse FreshnessPageToProto(
    const FreshnessPage& page, const FreshnessQuery& query,
    absl::Time evaluated_at) {
  v1::ListDatasetPartitionsResponse out;
  out.set_dataset(query.dataset);
  for (const PartitionFreshness& f : page.partitions) {
    v1::DatasetPartition* p = out.add_partitions();
    p->set_partition(f.partition);
    p->set_freshness(FreshnessToProto(f.freshness));
    p->set_backfill_id(f.job_id);
    if (!f.job_id.empty()) p->set_kind(VersionKindToProto(f.action));
    google::protobuf::Timestamp ts;
    if (TimeToProto(f.recorded_at, &ts)) *p->mutable_time() = ts;
    p->set_rows(f.rows);
    p->set_transform_version(f.transform_version);
    p->set_confirmed_by_backfill_id(f.confirmed_by);
    p->set_stale_reason(f.stale_reason);
    p->set_frozen(f.frozen);
    p->set_held_by_backfill_id(f.held_by);
  }
  if (!page.last.empty()) {
    out.set_next_page_token(EncodePageTokenAfter(
        PageList::kDatasetPartitions, FreshnessFilterHash(query), page.last));
  }
  int64_t total = 0;
  for (int64_t n : page.counts) total += n;
  out.set_total(total);
  out.set_current(page.counts[static_cast<int>(Freshness::kCurrent)]);
  out.set_stale(page.counts[static_cast<int>(Freshness::kStale)]);
  out.set_due(page.counts[static_cast<int>(Freshness::kDue)]);
  out.set_frozen(page.counts[static_cast<int>(Freshness::kFrozen)]);
  out.set_frozen_rule(page.frozen_rule);
  google::protobuf::Timestamp ts;
  if (TimeToProto(evaluated_at, &ts)) *out.mutable_evaluate_time() = ts;
  return out;
}

}  // namespace backfill
