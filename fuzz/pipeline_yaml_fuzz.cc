// Fuzz target: whole pipeline files. The input is the YAML text of one
// pipeline file, loaded with LoadPipelineTexts() (the same parser and
// catalog checks as `backfilld --pipelines DIR`, without the filesystem).
//
// Beyond "no crash, no sanitizer report, no exception escapes":
//   - loading is deterministic: the same text loads again to the same
//     datasets (an accepted spec is accepted again);
//   - every derived dataset's stored transform is canonical: running
//     CanonicalTransform() over it with the dataset's extra parameters gives
//     it back unchanged;
//   - every dataset of a two-dimensional layout declares keys that
//     ValidateDimensionKey() accepts.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/catalog.h"
#include "core/model/partition_layout.h"
#include "core/model/pipeline_loader.h"
#include "core/model/transform_parameters.h"
#include "core/model/transform_sql.h"
#include "fuzz/fuzz_check.h"

namespace {

using backfill::Catalog;
using backfill::DatasetSpec;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::pair<std::string, std::string>> files = {
      {"fuzz.yaml", text}};
  absl::StatusOr<Catalog> catalog = backfill::LoadPipelineTexts(files);
  absl::StatusOr<Catalog> again = backfill::LoadPipelineTexts(files);
  FUZZ_CHECK(catalog.ok() == again.ok());
  if (!catalog.ok()) {
    FUZZ_CHECK(catalog.status() == again.status());
    return 0;
  }
  FUZZ_CHECK(!catalog->datasets().empty());
  FUZZ_CHECK(catalog->datasets().size() == again->datasets().size());
  for (size_t i = 0; i < catalog->datasets().size(); ++i) {
    const DatasetSpec& d = catalog->datasets()[i];
    const DatasetSpec& e = again->datasets()[i];
    FUZZ_CHECK(d.name == e.name && d.transform == e.transform &&
               d.transform_version == e.transform_version);
    FUZZ_CHECK(catalog->Find(d.name) != nullptr);
    if (d.two_dimensional()) {
      for (const std::string& key : d.layout().keys) {
        FUZZ_CHECK(backfill::ValidateDimensionKey(key).ok());
      }
    }
    if (!d.is_derived()) continue;
    absl::StatusOr<std::string> canonical = backfill::CanonicalTransform(
        d.transform, backfill::ExtraParametersOf(d));
    FUZZ_CHECK(canonical.ok());
    FUZZ_CHECK(*canonical == d.transform);
  }
  return 0;
}
