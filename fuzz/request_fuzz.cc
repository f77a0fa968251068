// Fuzz target: what backfilld does with a request before it reaches the
// job machinery. The first input byte chooses the request; the rest is the
// request's bytes as they arrive on the wire (a serialized backfill.v1
// message), decoded with ParseRequest() (server/raw_request.h: the UTF-8
// check of every string field, then protobuf's parse), then validated as
// the handler does it, without gRPC or a network:
//   0, 1  PlanBackfillRequest, SubmitBackfillRequest: RequestFromProto and
//         the planner's validation and plan (scope, ranges, partition
//         lists, affected_by, entity keys, budgets) over an in-memory
//         catalog of every layout and mapping, with a fake engine;
//   2     ListBackfillsRequest: JobPageQueryFromProto, then the page read
//         (page token decoding) over an empty in-memory store;
//   3     ListPartitionsRequest: PartitionPageQueryFromProto and the page;
//         the same bytes as a ListDatasetPartitionsRequest:
//         FreshnessQueryFromProto and the page (ReadDatasetFreshness) over
//         the catalog and an empty store;
//   4     ListAuditEventsRequest: AuditQueryFromProto;
//   5     GetBackfillRequest: ValidateJobId and ViewFromProto;
//   6     a raw page token for DecodePageToken (both lists) and
//         DecodePageTokenKey; and the bytes as the key of a token;
//   7     the bearer token file (BearerTokens::Parse).
//
// Invariants beyond "no crash":
//   - bytes ParseRequest accepts re-serialize into bytes it accepts again;
//   - RequestToProto(RequestFromProto(p)) converts back to the same
//     request (field for field);
//   - an accepted plan has the target among its datasets, and every
//     planned partition is valid for its dataset's layout;
//   - a page token made for a position decodes to that position, and one
//     made after a key to that key, for its own list and filters only;
//   - an accepted token file has at least one entry and knows no empty
//     token.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "backfill/v1/backfill.pb.h"
#include "core/governance/dataset_freshness.h"
#include "core/governance/job_listing.h"
#include "core/governance/page_token.h"
#include "core/model/catalog.h"
#include "core/model/job.h"
#include "core/model/partition_layout.h"
#include "core/model/pipeline_loader.h"
#include "core/plan/planner.h"
#include "fuzz/fuzz_check.h"
#include "server/bearer_tokens.h"
#include "server/freshness_convert.h"
#include "server/governance_convert.h"
#include "server/listing_convert.h"
#include "server/proto_convert.h"
#include "server/raw_request.h"
#include "tests/testing/fake_engine.h"
#include "tests/testing/memory_state_store.h"

namespace {

using backfill::Catalog;

// Every layout (hour, day, month, key, time x key, none) and mapping
// (identity, rollup, lookback, all), an entity key and budgets.
constexpr char kPipeline[] = R"(datasets:
  - name: clicks
    kind: source
    table: raw_clicks
    partition: {column: ts, grain: hour}
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: customers
    kind: source
    table: dim_customers
  - name: regions
    kind: source
    table: raw_regions
    partition: {column: region, grain: key, keys: [eu, us, apac]}
  - name: events
    kind: source
    table: raw_events
    partition: {column: ds, grain: day, key_column: region, keys: [eu, us]}
  - name: hourly
    kind: derived
    table: hourly
    partition: {column: ts, grain: hour}
    upstream: [{dataset: clicks, mapping: identity}]
    transform: SELECT ts, COUNT(*) AS n FROM raw_clicks WHERE ts >= :partition_start AND ts < :partition_end GROUP BY 1
    contract: {columns: {ts: TEXT, n: INTEGER}}
  - name: daily
    kind: derived
    table: daily
    partition: {column: ds, grain: day}
    entity_key: customer_id
    max_cost: 100000
    upstream:
      - {dataset: orders, mapping: identity}
      - {dataset: customers, mapping: all}
      - {dataset: hourly, mapping: rollup}
    transform: SELECT order_date AS ds, customer_id, SUM(amount) AS revenue FROM raw_orders WHERE order_date >= :partition_start AND order_date < :partition_end GROUP BY 1, 2
    contract: {columns: {ds: TEXT, customer_id: TEXT, revenue: REAL}}
  - name: weekly
    kind: derived
    table: weekly
    partition: {column: ds, grain: day}
    upstream: [{dataset: daily, mapping: {lookback: 6}}]
    transform: SELECT ds, SUM(revenue) AS revenue FROM daily WHERE ds >= :window_start AND ds < :partition_end GROUP BY 1
    contract: {columns: {ds: TEXT, revenue: REAL}}
  - name: monthly
    kind: derived
    table: monthly
    partition: {column: month, grain: month}
    upstream: [{dataset: daily, mapping: rollup}]
    transform: SELECT substr(ds, 1, 7) AS month, SUM(revenue) AS revenue FROM daily WHERE ds >= :partition_start AND ds < :partition_end GROUP BY 1
    contract: {columns: {month: TEXT, revenue: REAL}}
  - name: per_region
    kind: derived
    table: per_region
    partition: {column: region, grain: key, keys: [eu, us, apac]}
    upstream: [{dataset: regions, mapping: identity}]
    transform: SELECT region, COUNT(*) AS n FROM raw_regions WHERE region = :partition GROUP BY 1
    contract: {columns: {region: TEXT, n: INTEGER}}
  - name: region_daily
    kind: derived
    table: region_daily
    partition: {column: ds, grain: day, key_column: region, keys: [eu, us]}
    upstream: [{dataset: events, mapping: identity}]
    transform: SELECT ds, region, COUNT(*) AS n FROM raw_events WHERE ds >= :partition_start AND ds < :partition_end AND region = :partition_key GROUP BY 1, 2
    contract: {columns: {ds: TEXT, region: TEXT, n: INTEGER}}
  - name: totals
    kind: derived
    table: totals
    upstream: [{dataset: customers, mapping: all}]
    transform: SELECT COUNT(*) AS n FROM dim_customers
    contract: {columns: {n: INTEGER}}
)";

const Catalog* catalog = nullptr;

std::string Serialized(const google::protobuf::Message& m) {
  std::string out;
  FUZZ_CHECK(m.SerializeToString(&out));
  return out;
}

void Plan(const backfill::v1::BackfillRequest& proto) {
  const backfill::BackfillRequest request = backfill::RequestFromProto(proto);
  const backfill::v1::BackfillRequest back = backfill::RequestToProto(request);
  FUZZ_CHECK(Serialized(backfill::RequestToProto(
                 backfill::RequestFromProto(back))) == Serialized(back));
  backfill::testing::FakeEngine engine;
  backfill::PlannerLimits limits;
  limits.max_partitions = 2000;
  const backfill::Planner planner(catalog, &engine, limits);
  absl::StatusOr<backfill::Plan> plan = planner.MakePlan(request);
  if (!plan.ok()) return;
  bool has_target = false;
  for (const backfill::DatasetPlan& d : plan->datasets) {
    const backfill::DatasetSpec* spec = catalog->Find(d.dataset);
    FUZZ_CHECK(spec != nullptr);
    has_target = has_target || d.dataset == request.dataset;
    for (const std::string& p : d.partitions) {
      FUZZ_CHECK(backfill::ValidatePartition(spec->layout(), p).ok());
    }
  }
  FUZZ_CHECK(has_target);
}

template <class Request>
bool Parse(std::string_view wire, Request* request) {
  if (!backfill::ParseRequest(wire, request).ok()) return false;
  Request again;
  FUZZ_CHECK(backfill::ParseRequest(Serialized(*request), &again).ok());
  return true;
}

void PageToken(std::string_view rest) {
  using backfill::PageList;
  for (PageList list : {PageList::kJobs, PageList::kPartitions}) {
    const uint64_t hash = backfill::FilterHash(list, {std::string(rest)});
    (void)backfill::DecodePageToken(list, rest, hash, "filters");
    uint64_t mixed = rest.size();
    for (unsigned char c : rest) mixed = mixed * 31 + c;
    const int64_t position = static_cast<int64_t>(mixed >> 1);
    const std::string token = backfill::EncodePageToken(list, hash, position);
    absl::StatusOr<int64_t> decoded =
        backfill::DecodePageToken(list, token, hash, "filters");
    FUZZ_CHECK(decoded.ok() && *decoded == position);
    FUZZ_CHECK(
        !backfill::DecodePageToken(list, token, hash + 1, "filters").ok());
    const PageList other =
        list == PageList::kJobs ? PageList::kPartitions : PageList::kJobs;
    FUZZ_CHECK(!backfill::DecodePageToken(other, token, hash, "filters").ok());
  }
  // Tokens after a key (ListDatasetPartitions).
  const PageList list = PageList::kDatasetPartitions;
  const uint64_t hash = backfill::FilterHash(list, {std::string(rest)});
  (void)backfill::DecodePageTokenKey(list, rest, hash, "filters");
  const std::string_view key = rest.substr(0, backfill::kMaxPageTokenKey);
  const std::string token = backfill::EncodePageTokenAfter(list, hash, key);
  absl::StatusOr<std::string> decoded =
      backfill::DecodePageTokenKey(list, token, hash, "filters");
  FUZZ_CHECK(decoded.ok() && *decoded == key);
  FUZZ_CHECK(
      !backfill::DecodePageTokenKey(list, token, hash + 1, "filters").ok());
  FUZZ_CHECK(
      !backfill::DecodePageTokenKey(PageList::kJobs, token, hash, "filters")
           .ok());
  FUZZ_CHECK(!backfill::DecodePageToken(list, token, hash, "filters").ok());
}

void TokenFile(std::string_view rest) {
  absl::StatusOr<backfill::BearerTokens> tokens =
      backfill::BearerTokens::Parse(rest, "tokens.yaml");
  if (!tokens.ok()) return;
  FUZZ_CHECK(tokens->size() > 0);
  FUZZ_CHECK(!tokens->Find("").has_value());
  (void)tokens->Find(rest);
  (void)tokens->FindCertificateHolder(rest);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  absl::StatusOr<Catalog> loaded =
      backfill::LoadPipelineTexts({{"fuzz.yaml", kPipeline}});
  FUZZ_CHECK(loaded.ok());
  catalog = new Catalog(*std::move(loaded));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1),
                              size - 1);
  switch (data[0] % 8) {
    case 0: {
      backfill::v1::PlanBackfillRequest request;
      if (Parse(rest, &request)) Plan(request.request());
      break;
    }
    case 1: {
      backfill::v1::SubmitBackfillRequest request;
      if (Parse(rest, &request)) Plan(request.request());
      break;
    }
    case 2: {
      backfill::v1::ListBackfillsRequest request;
      if (!Parse(rest, &request)) break;
      absl::StatusOr<backfill::JobPageQuery> query =
          backfill::JobPageQueryFromProto(request);
      if (!query.ok()) break;
      backfill::testing::InMemoryStateStore store;
      (void)backfill::ReadJobPage(store, *query);
      break;
    }
    case 3: {
      backfill::testing::InMemoryStateStore store;
      backfill::v1::ListPartitionsRequest request;
      if (Parse(rest, &request)) {
        absl::StatusOr<backfill::PartitionPageQuery> query =
            backfill::PartitionPageQueryFromProto(request);
        if (query.ok()) (void)backfill::ReadPartitionPage(store, *query);
      }
      backfill::v1::ListDatasetPartitionsRequest freshness;
      if (Parse(rest, &freshness)) {
        absl::StatusOr<backfill::FreshnessQuery> query =
            backfill::FreshnessQueryFromProto(freshness);
        if (query.ok()) {
          backfill::testing::FakeEngine engine;
          (void)backfill::ReadDatasetFreshness(*catalog, engine, store, {},
                                               *query);
        }
      }
      break;
    }
    case 4: {
      backfill::v1::ListAuditEventsRequest request;
      if (Parse(rest, &request)) (void)backfill::AuditQueryFromProto(request);
      break;
    }
    case 5: {
      backfill::v1::GetBackfillRequest request;
      if (!Parse(rest, &request)) break;
      (void)backfill::ValidateJobId(request.id());
      (void)backfill::ViewFromProto(request.view(), backfill::JobView::kFull);
      break;
    }
    case 6:
      PageToken(rest);
      break;
    case 7:
      TokenFile(rest);
      break;
  }
  return 0;
}
