// Transform parameters: the one judgement of which parameters a transform
// may use, as the loader, the static check and the engine apply it.

#include <string>

#include "core/model/transform_parameters.h"
#include "core/model/transform_sql.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_transform_parameters_test {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(TransformParametersTest, TheThreeAreAlwaysBound) {
  for (const char* p : {":partition_start", ":partition_end", ":partition"}) {
    EXPECT_THAT(ParameterProblem(p, {}), IsEmpty()) << p;
  }
}

TEST(TransformParametersTest, EachExtraOnlyWhereTheDatasetDeclaresIt) {
  struct Case {
    const char* name;
    ExtraParameters allowing;
    const char* needs;
  };
  ExtraParameters window, keys, key;
  window.window_start = true;
  keys.keys = true;
  key.partition_key = true;
  for (const Case& c : {Case{":window_start", window, "a `lookback` upstream"},
                        Case{":keys", keys, "an `entity_key`"},
                        Case{":partition_key", key, "time x key"}}) {
    SCOPED_TRACE(c.name);
    EXPECT_THAT(ParameterProblem(c.name, c.allowing), IsEmpty());
    const std::string refused = ParameterProblem(c.name, {});
    EXPECT_THAT(refused, HasSubstr(std::string("the transform uses the "
                                               "parameter ") +
                                   c.name + ", which is bound only for"));
    EXPECT_THAT(refused, HasSubstr(c.needs));
  }
}

TEST(TransformParametersTest, AnUnknownOneNamesWhatIsBound) {
  ExtraParameters all;
  all.window_start = all.keys = all.partition_key = true;
  EXPECT_EQ(ParameterProblem(":partiton", {}),
            "the transform uses the parameter :partiton; only "
            ":partition_start, :partition_end and :partition are bound");
  EXPECT_EQ(ParameterProblem(":x", all),
            "the transform uses the parameter :x; only :partition_start, "
            ":partition_end and :partition are bound; :window_start is bound "
            "too; :keys is bound too; :partition_key is bound too");
}

TEST(TransformParametersTest, TheLoaderAgrees) {
  ExtraParameters keys;
  keys.keys = true;
  EXPECT_TRUE(CanonicalTransform("SELECT :keys AS k", keys).ok());
  absl::StatusOr<std::string> refused = CanonicalTransform("SELECT :keys");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), ParameterProblem(":keys", {}));
}

}  // namespace
}  // namespace core_transform_parameters_test
}  // namespace backfill
