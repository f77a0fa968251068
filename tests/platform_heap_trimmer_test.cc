// HeapTrimmer: when it trims (after a request, once requests pause, at most
// `longest_wait` late), how requests coalesce, what Stop() drops, that job
// events ask for a trim, and, with glibc's allocator, that a trim gives the
// free memory of a fragmented heap back to the system (resident memory read
// from /proc/self/status).
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "platform/heap_trimmer.h"

namespace backfill {
namespace platform_heap_trimmer_test {
namespace {

constexpr absl::Duration kBound = absl::Seconds(30);

HeapTrimmer::Options Immediate() {
  HeapTrimmer::Options options;
  options.quiet = absl::ZeroDuration();
  options.longest_wait = absl::ZeroDuration();
  return options;
}

// Waits (at most kBound) until `trimmer` has trimmed `n` times.
bool WaitForTrims(const HeapTrimmer& trimmer, int64_t n) {
  const absl::Time deadline = absl::Now() + kBound;
  while (trimmer.trims() < n) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(HeapTrimmerTest, NothingIsTrimmedUntilAsked) {
  int calls = 0;
  HeapTrimmer trimmer(Immediate(), [&] { ++calls; });
  absl::SleepFor(absl::Milliseconds(20));
  trimmer.Stop();
  EXPECT_EQ(trimmer.trims(), 0);
  EXPECT_EQ(calls, 0);
}

TEST(HeapTrimmerTest, ARequestIsFollowedByATrim) {
  int calls = 0;
  HeapTrimmer trimmer(Immediate(), [&] { ++calls; });
  trimmer.Request();
  ASSERT_TRUE(WaitForTrims(trimmer, 1));
  trimmer.Stop();
  EXPECT_EQ(trimmer.trims(), 1);
  EXPECT_EQ(calls, 1);
}

TEST(HeapTrimmerTest, RequestsWhileATrimRunsAreServedByOneMore) {
  absl::Notification entered;
  absl::Notification release;
  int calls = 0;
  HeapTrimmer trimmer(Immediate(), [&] {
    if (++calls == 1) {
      entered.Notify();
      release.WaitForNotification();
    }
  });
  trimmer.Request();
  ASSERT_TRUE(entered.WaitForNotificationWithTimeout(kBound));
  for (int i = 0; i < 5; ++i) trimmer.Request();
  release.Notify();
  ASSERT_TRUE(WaitForTrims(trimmer, 2));
  trimmer.Stop();
  EXPECT_EQ(trimmer.trims(), 2);
  EXPECT_EQ(calls, 2);
}

TEST(HeapTrimmerTest, ABurstOfRequestsIsTrimmedOnceAfterItPauses) {
  HeapTrimmer::Options options;
  options.quiet = absl::Seconds(2);
  options.longest_wait = absl::Hours(1);
  absl::Mutex mu;
  absl::Time trimmed_at = absl::InfinitePast();
  HeapTrimmer trimmer(options, [&] {
    absl::MutexLock lock(&mu);
    trimmed_at = absl::Now();
  });
  for (int i = 0; i < 10; ++i) trimmer.Request();
  const absl::Time last = absl::Now();
  ASSERT_TRUE(WaitForTrims(trimmer, 1));
  trimmer.Stop();
  EXPECT_EQ(trimmer.trims(), 1);
  absl::MutexLock lock(&mu);
  EXPECT_GE(trimmed_at - last, absl::Seconds(2));
}

TEST(HeapTrimmerTest, RequestsThatNeverPauseWaitAtMostTheLongestWait) {
  HeapTrimmer::Options options;
  options.quiet = absl::Hours(1);
  options.longest_wait = absl::Milliseconds(100);
  HeapTrimmer trimmer(options, [] {});
  const absl::Time first = absl::Now();
  trimmer.Request();
  ASSERT_TRUE(WaitForTrims(trimmer, 1));
  EXPECT_GE(absl::Now() - first, absl::Milliseconds(100));
}

TEST(HeapTrimmerTest, StopDropsWhatIsNotServedAndIgnoresLaterRequests) {
  HeapTrimmer::Options options;
  options.quiet = absl::Hours(1);
  options.longest_wait = absl::Hours(1);
  int calls = 0;
  HeapTrimmer trimmer(options, [&] { ++calls; });
  trimmer.Request();
  const absl::Time start = absl::Now();
  trimmer.Stop();  // does not wait out the hour
  EXPECT_LT(absl::Now() - start, kBound);
  trimmer.Request();
  trimmer.Stop();
  EXPECT_EQ(trimmer.trims(), 0);
  EXPECT_EQ(calls, 0);
}

TEST(HeapTrimmerTest, EveryJobTransitionAndEndAsksForATrim) {
  HeapTrimmer trimmer(Immediate(), [] {});
  JobObserver& observer = trimmer;
  observer.OnJobTransition("bf-1", JobState::kRunning, JobState::kValidating,
                           "validating 3 staged partitions");
  ASSERT_TRUE(WaitForTrims(trimmer, 1));
  observer.OnJobFinished("bf-1", JobState::kSucceeded, 10, 9);
  ASSERT_TRUE(WaitForTrims(trimmer, 2));
  // Events the trimmer does not follow ask for nothing.
  observer.OnPartitionAttempt(true, absl::Milliseconds(3));
  observer.OnPartitionCheckpointed("daily", TaskState::kStaged, 4);
  trimmer.Stop();
  EXPECT_EQ(trimmer.trims(), 2);
}

// The process's resident memory, in KiB (VmRSS), or -1.
int64_t ResidentKb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return -1;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BACKFILL_SANITIZED_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define BACKFILL_SANITIZED_HEAP 1
#endif
#endif

TEST(HeapTrimmerTest, AFragmentedHeapsFreeMemoryGoesBackToTheSystem) {
#if defined(BACKFILL_SANITIZED_HEAP) || !defined(__GLIBC__)
  GTEST_SKIP() << "the heap is not glibc's malloc in this build";
#else
  // 80 MB in blocks of 4,000 bytes, every page written; then all but one
  // block in 64 freed. The live blocks pin the heap's top in place, so
  // free() itself cannot shrink it: only a trim returns the pages between.
  constexpr int kBlocks = 20'000;
  constexpr size_t kSize = 4'000;
  std::vector<char*> blocks(kBlocks);
  for (char*& b : blocks) {
    b = static_cast<char*>(std::malloc(kSize));
    ASSERT_NE(b, nullptr);
    std::memset(b, 1, kSize);
  }
  for (int i = 0; i < kBlocks; ++i) {
    if (i % 64 != 63) {
      std::free(blocks[i]);
      blocks[i] = nullptr;
    }
  }
  const int64_t before = ResidentKb();
  ASSERT_GT(before, 0);
  HeapTrimmer trimmer;  // malloc_trim, after the default quiet time
  trimmer.Request();
  ASSERT_TRUE(WaitForTrims(trimmer, 1));
  const int64_t after = ResidentKb();
  for (char* b : blocks) std::free(b);
  // About 78 MB were freed; at least half of it must have gone back.
  EXPECT_LT(after, before - 39 * 1024)
      << "resident " << before << " KiB before the trim, " << after
      << " KiB after";
#endif
}

}  // namespace
}  // namespace platform_heap_trimmer_test
}  // namespace backfill
