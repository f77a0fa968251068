// LiveCatalog: snapshots outlive a Replace(), new Get()s see the new
// catalog, and concurrent readers always see one whole catalog.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/model/live_catalog.h"
#include "core/model/pipeline_loader.h"
#include "gtest/gtest.h"

namespace backfill {
namespace core_live_catalog_test {
namespace {

// A catalog of `n` source datasets named d0 .. d<n-1>.
std::shared_ptr<const Catalog> CatalogOf(int n) {
  std::string yaml = "datasets:\n";
  for (int i = 0; i < n; ++i) {
    yaml += "  - {name: d" + std::to_string(i) + ", kind: source, table: t" +
            std::to_string(i) + "}\n";
  }
  absl::StatusOr<Catalog> catalog = LoadPipelineTexts({{"p.yaml", yaml}});
  EXPECT_TRUE(catalog.ok()) << catalog.status();
  return std::make_shared<const Catalog>(*std::move(catalog));
}

TEST(LiveCatalogTest, SnapshotsSurviveAReplace) {
  LiveCatalog live(CatalogOf(1));
  std::shared_ptr<const Catalog> before = live.Get();
  const DatasetSpec* d0 = before->Find("d0");
  ASSERT_NE(d0, nullptr);
  live.Replace(CatalogOf(2));
  EXPECT_EQ(live.generation(), 1u);
  // The old snapshot and the pointer into it are still valid.
  EXPECT_EQ(before->datasets().size(), 1u);
  EXPECT_EQ(d0->table, "t0");
  EXPECT_EQ(live.Get()->datasets().size(), 2u);
  EXPECT_NE(live.Get()->Find("d1"), nullptr);
}

TEST(LiveCatalogTest, BorrowingNeverDeletesTheCatalog) {
  auto owned = CatalogOf(3);
  {
    std::unique_ptr<LiveCatalog> live = LiveCatalog::Borrowing(owned.get());
    EXPECT_EQ(live->Get().get(), owned.get());
  }
  EXPECT_EQ(owned->datasets().size(), 3u);
}

TEST(LiveCatalogTest, ReadersSeeWholeCatalogsWhileItIsReplaced) {
  LiveCatalog live(CatalogOf(1));
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&] {
      while (!stop) {
        std::shared_ptr<const Catalog> c = live.Get();
        const size_t n = c->datasets().size();
        // Every dataset d0 .. d<n-1> of a catalog of n is there.
        if (c->Find("d" + std::to_string(n - 1)) == nullptr ||
            c->Find("d" + std::to_string(n)) != nullptr) {
          ++torn;
        }
      }
    });
  }
  for (int i = 2; i <= 50; ++i) live.Replace(CatalogOf(i));
  stop = true;
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(torn, 0);
  EXPECT_EQ(live.Get()->datasets().size(), 50u);
}

}  // namespace
}  // namespace core_live_catalog_test
}  // namespace backfill
