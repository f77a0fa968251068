// Fuzz target: transform SQL. The first input byte chooses the extra
// parameters a transform may use (bit 0 :window_start, bit 1 :keys, bit 2
// :partition_key) and the YAML frame (bit 3); the rest is SQL text, fed to
//   - CanonicalTransform(), the scan of a transform (one SELECT,
//     only bound parameters, comments, strings and quoted identifiers);
//   - the pipeline loader, as the `transform:` of a derived dataset in a
//     fixed pipeline file (a block scalar, one of two frames: a day
//     dataset, or a time x key dataset with a lookback upstream and an
//     entity_key, which gets every extra parameter);
//   - sql::ToPositional(), the PostgreSQL engine's named -> positional
//     parameter rewrite;
//   - CheckPredicate(), the form check of an affected_by predicate.
//
// Invariants beyond "no crash":
//   - CanonicalTransform is idempotent (its output is accepted and comes
//     back unchanged) and keeps the version: TransformVersion of the output
//     equals that of the input (comments, whitespace and a trailing ';' do
//     not count);
//   - allowing more parameters never refuses a transform fewer accepted;
//   - a transform the frame loads is stored canonical;
//   - ToPositional gives distinct names, each a ':' name found in the
//     input, and returns text without parameters unchanged.

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/model/catalog.h"
#include "core/model/pipeline_loader.h"
#include "core/model/transform_parameters.h"
#include "core/model/transform_sql.h"
#include "core/plan/affected_by.h"
#include "fuzz/fuzz_check.h"
#include "storage/sql/named_parameters.h"

namespace {

using backfill::ExtraParameters;

constexpr char kDayFrame[] = R"(datasets:
  - name: orders
    kind: source
    table: raw_orders
    partition: {column: order_date, grain: day}
  - name: daily
    kind: derived
    table: daily
    partition: {column: ds, grain: day}
    upstream: [{dataset: orders, mapping: identity}]
    contract: {columns: {ds: TEXT, n: INTEGER}}
    transform: |
)";

constexpr char kTimeKeyFrame[] = R"(datasets:
  - name: events
    kind: source
    table: raw_events
    partition: {column: ds, grain: day, key_column: region, keys: [eu, us]}
  - name: rolling
    kind: derived
    table: rolling
    partition: {column: ds, grain: day, key_column: region, keys: [eu, us]}
    entity_key: customer
    upstream: [{dataset: events, mapping: {lookback: 6}}]
    contract: {columns: {ds: TEXT, region: TEXT, customer: TEXT, n: INTEGER}}
    transform: |
)";

void CheckCanonical(std::string_view sql, const ExtraParameters& extra) {
  absl::StatusOr<std::string> canonical =
      backfill::CanonicalTransform(sql, extra);
  if (!canonical.ok()) return;
  absl::StatusOr<std::string> again =
      backfill::CanonicalTransform(*canonical, extra);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *canonical);
  FUZZ_CHECK(backfill::TransformVersion(*canonical) ==
             backfill::TransformVersion(sql));
  const ExtraParameters all{true, true, true};
  FUZZ_CHECK(backfill::CanonicalTransform(sql, all).ok());
}

void CheckFramed(std::string_view sql, bool time_key) {
  // Every line indented as the block scalar's content.
  std::string text = time_key ? kTimeKeyFrame : kDayFrame;
  absl::StrAppend(&text, "      ",
                  absl::StrReplaceAll(std::string(sql), {{"\n", "\n      "}}),
                  "\n");
  absl::StatusOr<backfill::Catalog> catalog =
      backfill::LoadPipelineTexts({{"frame.yaml", text}});
  if (!catalog.ok()) return;
  const backfill::DatasetSpec* d =
      catalog->Find(time_key ? "rolling" : "daily");
  FUZZ_CHECK(d != nullptr);
  absl::StatusOr<std::string> canonical =
      backfill::CanonicalTransform(d->transform, ExtraParametersOf(*d));
  FUZZ_CHECK(canonical.ok());
  FUZZ_CHECK(*canonical == d->transform);
}

void CheckPositional(std::string_view sql) {
  absl::StatusOr<backfill::sql::PositionalSql> positional =
      backfill::sql::ToPositional(sql);
  if (!positional.ok()) return;
  std::set<std::string> names;
  for (const std::string& name : positional->names) {
    FUZZ_CHECK(name.size() >= 2 && name[0] == ':');
    FUZZ_CHECK(sql.find(name) != std::string_view::npos);
    FUZZ_CHECK(names.insert(name).second);
  }
  if (positional->names.empty()) FUZZ_CHECK(positional->text == sql);
  if (sql.find(':') == std::string_view::npos) {
    FUZZ_CHECK(positional->names.empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view sql(reinterpret_cast<const char*>(data + 1), size - 1);
  ExtraParameters extra;
  extra.window_start = (flags & 1) != 0;
  extra.keys = (flags & 2) != 0;
  extra.partition_key = (flags & 4) != 0;
  CheckCanonical(sql, extra);
  CheckFramed(sql, (flags & 8) != 0);
  CheckPositional(sql);
  (void)backfill::CheckPredicate(sql);
  return 0;
}
