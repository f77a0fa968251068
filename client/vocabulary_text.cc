#include "client/vocabulary_text.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "google/protobuf/generated_enum_reflection.h"

namespace backfill {
namespace {

template <typename Enum>
std::string Word(Enum value, absl::string_view prefix) {
  const int number = static_cast<int>(value);
  if (number == 0) return "";
  const google::protobuf::EnumValueDescriptor* described =
      google::protobuf::GetEnumDescriptor<Enum>()->FindValueByNumber(number);
  if (described == nullptr) return absl::StrCat("unknown(", number, ")");
  absl::string_view word = described->name();
  absl::ConsumePrefix(&word, prefix);
  return absl::AsciiStrToLower(word);
}

}  // namespace

std::string GrainText(v1::Grain grain) {
  return grain == v1::GRAIN_NONE ? "" : Word(grain, "GRAIN_");
}

std::string DatasetKindText(v1::DatasetKind kind) {
  return Word(kind, "DATASET_KIND_");
}

std::string MappingText(v1::PartitionMapping mapping) {
  return Word(mapping, "PARTITION_MAPPING_");
}

std::string ConsumerKindText(v1::ConsumerKind kind) {
  return Word(kind, "CONSUMER_KIND_");
}

std::string CostUnitText(v1::CostUnit unit) { return Word(unit, "COST_UNIT_"); }

std::string EstimateSourceText(v1::EstimateSource source) {
  return Word(source, "ESTIMATE_SOURCE_");
}

std::string VersionKindText(v1::VersionKind kind) {
  return Word(kind, "VERSION_KIND_");
}

std::string FreshnessText(v1::PartitionFreshness freshness) {
  return Word(freshness, "PARTITION_FRESHNESS_");
}

}  // namespace backfill
