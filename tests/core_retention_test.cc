// Tests of the retention of rollback copies (core/governance/retention.h):
// which copies a dataset's policy lets go, computed by hand for each case.

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/governance/retention.h"
#include "core/model/pipeline_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_retention_test {
namespace {

using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

absl::Time T(int64_t hours) {
  return absl::FromUnixSeconds(1700000000) + absl::Hours(hours);
}

Catalog TwoDatasets() {
  absl::StatusOr<Catalog> c = LoadPipelineTexts({{"p.yaml", R"(
datasets:
  - name: orders
    kind: source
    partition: {column: ds, grain: day}
  - name: kept3
    kind: derived
    partition: {column: ds, grain: day}
    upstream: [{dataset: orders, mapping: identity}]
    transform: "select ds from orders where ds = :partition"
    contract: {columns: {ds: TEXT}}
    retention: {versions: 3}
  - name: young
    kind: derived
    partition: {column: ds, grain: day}
    upstream: [{dataset: orders, mapping: identity}]
    transform: "select ds from orders where ds = :partition"
    contract: {columns: {ds: TEXT}}
    retention: {max_age: 2d}
)"}});
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

std::vector<std::string> Names(const std::vector<RollbackCopy>& copies) {
  std::vector<std::string> out;
  for (const RollbackCopy& c : copies) {
    out.push_back(absl::StrCat(c.job_id, "/", c.dataset));
  }
  return out;
}

TEST(RetentionTest, KeepsTheNewestVersionsPerDataset) {
  const Catalog catalog = TwoDatasets();
  std::vector<RollbackCopy> copies;
  std::map<std::string, absl::Time> published;
  for (int i = 1; i <= 6; ++i) {
    const std::string id = absl::StrCat("bf-", i);
    copies.push_back({id, "kept3"});
    published[id] = T(i);
  }
  // bf-2 published last although numbered early: time decides.
  published["bf-2"] = T(100);
  EXPECT_THAT(Names(ExpiredCopies(copies, published, catalog, T(101))),
              UnorderedElementsAre("bf-1/kept3", "bf-3/kept3", "bf-4/kept3"));
  // Equal times: the higher job number is newer.
  for (auto& [id, t] : published) t = T(1);
  EXPECT_THAT(Names(ExpiredCopies(copies, published, catalog, T(2))),
              UnorderedElementsAre("bf-3/kept3", "bf-2/kept3", "bf-1/kept3"));
}

TEST(RetentionTest, DropsCopiesOlderThanMaxAgeAndKeepsTheUnknown) {
  const Catalog catalog = TwoDatasets();
  const std::vector<RollbackCopy> copies = {{"bf-1", "young"},
                                            {"bf-2", "young"},
                                            {"bf-3", "young"},
                                            {"bf-4", "gone"},
                                            {"bf-5", "young"}};
  const std::map<std::string, absl::Time> published = {
      {"bf-1", T(0)}, {"bf-2", T(47)}, {"bf-3", T(48)}, {"bf-4", T(0)}};
  // At T(96): bf-1 is 96 h old, bf-2 49 h (> 48 h), bf-3 exactly 48 h
  // (kept); bf-4's dataset is not declared; bf-5 recorded no publication
  // yet.
  EXPECT_THAT(Names(ExpiredCopies(copies, published, catalog, T(96))),
              UnorderedElementsAre("bf-1/young", "bf-2/young"));
  EXPECT_THAT(ExpiredCopies(copies, published, catalog, T(48)), IsEmpty());
}

TEST(RetentionTest, DescribesThePolicy) {
  RetentionPolicy policy;
  EXPECT_EQ(DescribeRetention(policy),
            "keeps the 10 newest rollback copies (the default)");
  policy.versions = 1;
  policy.max_age = absl::Hours(24 * 30);
  policy.declared = true;
  EXPECT_EQ(DescribeRetention(policy),
            "keeps the 1 newest rollback copy and none older than 30d");
}

}  // namespace
}  // namespace core_retention_test
}  // namespace backfill
