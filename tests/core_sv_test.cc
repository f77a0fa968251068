#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "core/base/sv.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_sv_test {
namespace {

TEST(SvTest, ViewsTheSameBytes) {
  const std::string text = "2025-03-01|eu";
  const std::string_view view(text);
  const absl::string_view sv = Sv(view);
  EXPECT_EQ(sv.data(), text.data());
  EXPECT_EQ(sv.size(), text.size());
  EXPECT_EQ(absl::StrCat("[", Sv(view.substr(0, 10)), "]"), "[2025-03-01]");
}

TEST(SvTest, KeepsEmbeddedZerosAndEmptyViews) {
  const std::string text("a\0b", 3);
  EXPECT_EQ(Sv(text).size(), 3u);
  EXPECT_TRUE(Sv(std::string_view()).empty());
}

}  // namespace
}  // namespace core_sv_test
}  // namespace backfill
