// Tests of StreamSlots: a per-key limit of concurrent streams whose slots
// are given back however the holder ends.

#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "server/stream_slots.h"

namespace backfill {
namespace server_stream_slots_test {
namespace {

TEST(StreamSlotsTest, LimitIsPerKeyAndASlotComesBackWhenReleased) {
  StreamSlots slots(2);
  std::optional<StreamSlots::Slot> a = slots.TryAcquire("vera");
  std::optional<StreamSlots::Slot> b = slots.TryAcquire("vera");
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(slots.InUse("vera"), 2);
  // The third of the same key is refused and not counted.
  EXPECT_FALSE(slots.TryAcquire("vera").has_value());
  EXPECT_EQ(slots.InUse("vera"), 2);
  // Another key has its own two.
  std::optional<StreamSlots::Slot> c = slots.TryAcquire("olivia");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(slots.InUse("olivia"), 1);

  a.reset();
  EXPECT_EQ(slots.InUse("vera"), 1);
  EXPECT_TRUE(slots.TryAcquire("vera").has_value());  // released at once
  EXPECT_EQ(slots.InUse("vera"), 1);
}

TEST(StreamSlotsTest, AMovedSlotIsReleasedOnceByItsLastHolder) {
  StreamSlots slots(1);
  std::optional<StreamSlots::Slot> first = slots.TryAcquire("k");
  ASSERT_TRUE(first.has_value());
  StreamSlots::Slot moved = std::move(*first);
  first.reset();  // the moved-from slot gives nothing back
  EXPECT_EQ(slots.InUse("k"), 1);
  EXPECT_FALSE(slots.TryAcquire("k").has_value());
  {
    StreamSlots::Slot sink = std::move(moved);
    EXPECT_EQ(sink.key(), "k");
  }
  EXPECT_EQ(slots.InUse("k"), 0);
}

TEST(StreamSlotsTest, ASlotComesBackWhenItsHolderThrows) {
  StreamSlots slots(1);
  try {
    std::optional<StreamSlots::Slot> slot = slots.TryAcquire("k");
    ASSERT_TRUE(slot.has_value());
    throw std::runtime_error("stream broke");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(slots.InUse("k"), 0);
  EXPECT_TRUE(slots.TryAcquire("k").has_value());
}

TEST(StreamSlotsTest, ConcurrentHoldersNeverExceedTheLimit) {
  constexpr int kLimit = 3;
  constexpr int kThreads = 8;
  constexpr int kRounds = 2000;
  StreamSlots slots(kLimit);
  std::vector<std::thread> threads;
  std::vector<int> over(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&slots, &over, t] {
      for (int i = 0; i < kRounds; ++i) {
        std::optional<StreamSlots::Slot> slot = slots.TryAcquire("shared");
        if (slot.has_value() && slots.InUse("shared") > kLimit) ++over[t];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(over[t], 0) << "thread " << t;
  EXPECT_EQ(slots.InUse("shared"), 0);
}

}  // namespace
}  // namespace server_stream_slots_test
}  // namespace backfill
