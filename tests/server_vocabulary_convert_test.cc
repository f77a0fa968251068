// The vocabulary enums on the wire: every value the domain has reaches the
// client as the word the pipeline files use for it, and every wire value
// (other than UNSPECIFIED) is one the server sends.

#include <set>
#include <string>
#include <utility>

#include "backfill/v1/backfill.pb.h"
#include "client/vocabulary_text.h"
#include "core/model/catalog.h"
#include "core/model/consumer_spec.h"
#include "core/model/job.h"
#include "core/model/partition.h"
#include "core/plan/cost_estimator.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "server/vocabulary_convert.h"

namespace backfill {
namespace server_vocabulary_convert_test {
namespace {

// The numbers of `Enum` other than 0 (UNSPECIFIED).
template <typename Enum>
std::set<int> DeclaredValues() {
  std::set<int> numbers;
  const google::protobuf::EnumDescriptor* d =
      google::protobuf::GetEnumDescriptor<Enum>();
  for (int i = 0; i < d->value_count(); ++i) {
    if (d->value(i)->number() != 0) numbers.insert(d->value(i)->number());
  }
  return numbers;
}

TEST(VocabularyConvertTest, GrainsReadAsInThePipelineFiles) {
  std::set<int> sent;
  // Each word as the pipeline files spell it, written here by hand; and
  // the loader's own name of the value (what the files are parsed with).
  const std::pair<Grain, const char*> grains[] = {{Grain::kNone, ""},
                                                  {Grain::kHour, "hour"},
                                                  {Grain::kDay, "day"},
                                                  {Grain::kMonth, "month"},
                                                  {Grain::kKey, "key"}};
  for (const auto& [g, word] : grains) {
    const v1::Grain wire = GrainToProto(g);
    sent.insert(wire);
    EXPECT_EQ(GrainText(wire), word) << v1::Grain_Name(wire);
    EXPECT_EQ(GrainText(wire), GrainName(g));
  }
  EXPECT_EQ(sent, DeclaredValues<v1::Grain>());
  EXPECT_EQ(GrainToProto(Grain::kNone), v1::GRAIN_NONE);
  EXPECT_EQ(GrainText(v1::GRAIN_NONE), "");
}

TEST(VocabularyConvertTest, DatasetKindsReadAsInThePipelineFiles) {
  std::set<int> sent;
  const std::pair<DatasetKind, const char*> kinds[] = {
      {DatasetKind::kSource, "source"}, {DatasetKind::kDerived, "derived"}};
  for (const auto& [k, word] : kinds) {
    const v1::DatasetKind wire = DatasetKindToProto(k);
    sent.insert(wire);
    EXPECT_EQ(DatasetKindText(wire), word);
    EXPECT_EQ(DatasetKindText(wire), DatasetKindName(k));
  }
  EXPECT_EQ(sent, DeclaredValues<v1::DatasetKind>());
}

TEST(VocabularyConvertTest, MappingsReadAsInThePipelineFiles) {
  std::set<int> sent;
  const std::pair<Mapping, const char*> mappings[] = {
      {Mapping::kIdentity, "identity"},
      {Mapping::kAll, "all"},
      {Mapping::kRollup, "rollup"},
      {Mapping::kLookback, "lookback"}};
  for (const auto& [m, word] : mappings) {
    const v1::PartitionMapping wire = MappingToProto(m);
    sent.insert(wire);
    EXPECT_EQ(MappingText(wire), word);
    EXPECT_EQ(MappingText(wire), MappingName(m));
  }
  EXPECT_EQ(sent, DeclaredValues<v1::PartitionMapping>());
}

TEST(VocabularyConvertTest, ConsumerKindsReadAsInThePipelineFiles) {
  std::set<int> sent;
  const std::pair<ConsumerKind, const char*> kinds[] = {
      {ConsumerKind::kHttp, "http"}, {ConsumerKind::kCommand, "command"}};
  for (const auto& [k, word] : kinds) {
    const v1::ConsumerKind wire = ConsumerKindToProto(k);
    sent.insert(wire);
    EXPECT_EQ(ConsumerKindText(wire), word);
    EXPECT_EQ(ConsumerKindText(wire), ConsumerKindName(k));
  }
  EXPECT_EQ(sent, DeclaredValues<v1::ConsumerKind>());
}

TEST(VocabularyConvertTest, EstimateSourcesAreTheEstimatorsWords) {
  std::set<int> sent;
  for (const char* word : {"history", "row_counts", "mixed"}) {
    const v1::EstimateSource wire = EstimateSourceToProto(word);
    sent.insert(wire);
    EXPECT_EQ(EstimateSourceText(wire), word);
  }
  EXPECT_EQ(sent, DeclaredValues<v1::EstimateSource>());
  // Not estimated, or a word this server does not know: unspecified, never
  // a wrong source.
  EXPECT_EQ(EstimateSourceToProto(""), v1::ESTIMATE_SOURCE_UNSPECIFIED);
  EXPECT_EQ(EstimateSourceToProto("History"), v1::ESTIMATE_SOURCE_UNSPECIFIED);
  EXPECT_EQ(EstimateSourceText(v1::ESTIMATE_SOURCE_UNSPECIFIED), "");
}

TEST(VocabularyConvertTest, VersionKindsSayWhatPutTheVersionInPlace) {
  EXPECT_EQ(VersionKindToProto(LineageAction::kPublish),
            v1::VERSION_KIND_BACKFILL);
  EXPECT_EQ(VersionKindToProto(LineageAction::kRollback),
            v1::VERSION_KIND_ROLLBACK);
  EXPECT_EQ(VersionKindText(v1::VERSION_KIND_BACKFILL), "backfill");
  EXPECT_EQ(VersionKindText(v1::VERSION_KIND_ROLLBACK), "rollback");
  EXPECT_EQ(
      DeclaredValues<v1::VersionKind>(),
      (std::set<int>{v1::VERSION_KIND_BACKFILL, v1::VERSION_KIND_ROLLBACK}));
}

TEST(VocabularyConvertTest, TheCostUnitIsTheOneTheMessagesName) {
  EXPECT_EQ(CostUnitText(v1::COST_UNIT_INPUT_ROWS), "input_rows");
  EXPECT_EQ(CostUnitText(v1::COST_UNIT_INPUT_ROWS), kCostUnit);
  EXPECT_EQ(DeclaredValues<v1::CostUnit>(),
            std::set<int>{v1::COST_UNIT_INPUT_ROWS});
}

TEST(VocabularyConvertTest, ANumberFromANewerServerIsShownAsUnknown) {
  EXPECT_EQ(GrainText(static_cast<v1::Grain>(42)), "unknown(42)");
  EXPECT_EQ(MappingText(static_cast<v1::PartitionMapping>(-3)), "unknown(-3)");
}

}  // namespace
}  // namespace server_vocabulary_convert_test
}  // namespace backfill
