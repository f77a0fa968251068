// Tests of server/process_collector: the parsers of /proc's text, and the
// live values of this test process against what the test itself knows.

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "server/process_collector.h"
#include "tests/testing/prometheus_text.h"

namespace backfill {
namespace server_process_collector_test {
namespace {

using ::backfill::testing::ParseSamples;
using ::backfill::testing::SumOf;

std::string ScrapeOf(const ProcessCollector& collector) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, collector.Collect());
  return out.str();
}

TEST(ProcessCollectorTest, ParsesStatWithSpacesAndParensInTheName) {
  // Fields 14, 15 and 22 (utime, stime, starttime) are 1500, 250, 98765.
  const std::string stat =
      "4242 (back fill) (d)) S 1 4242 4242 0 -1 4194560 2000 0 0 0 1500 250 "
      "0 0 20 0 9 0 98765 123456789 3000 18446744073709551615 1 1 0 0 0 0 0 "
      "0 0 0 0 0 17 1 0 0 0 0 0";
  absl::StatusOr<ProcStat> parsed = ParseProcStat(stat);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->utime_ticks, 1500u);
  EXPECT_EQ(parsed->stime_ticks, 250u);
  EXPECT_EQ(parsed->start_ticks, 98765u);
}

TEST(ProcessCollectorTest, RejectsWhatIsNotStat) {
  EXPECT_FALSE(ParseProcStat("").ok());
  EXPECT_FALSE(ParseProcStat("12 (x) S 1 2").ok());
  EXPECT_FALSE(
      ParseProcStat("12 (x) S 1 2 3 4 5 6 7 8 9 10 a b 1 1 1 1 1 1 1 1").ok());
  EXPECT_FALSE(ParseProcStatm("").ok());
  EXPECT_FALSE(ParseBootTime("cpu 1 2 3\nintr 5\n").ok());
}

TEST(ProcessCollectorTest, ParsesStatmAndBootTime) {
  absl::StatusOr<std::pair<uint64_t, uint64_t>> pages =
      ParseProcStatm("2500 700 300 10 0 900 0\n");
  ASSERT_TRUE(pages.ok()) << pages.status();
  EXPECT_EQ(pages->first, 2500u);
  EXPECT_EQ(pages->second, 700u);
  absl::StatusOr<uint64_t> boot =
      ParseBootTime("cpu  1 2 3\nctxt 99\nbtime 1700000000\nprocesses 5\n");
  ASSERT_TRUE(boot.ok()) << boot.status();
  EXPECT_EQ(*boot, 1700000000u);
}

TEST(ProcessCollectorTest, OpenFdsFollowTheFilesThisProcessOpens) {
  ProcessCollector collector;
  const double before =
      SumOf(ParseSamples(ScrapeOf(collector)), "process_open_fds");
  ASSERT_GT(before, 0);
  std::vector<int> fds;
  for (int i = 0; i < 7; ++i) {
    const int fd = open("/dev/null", O_RDONLY);
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  const auto samples = ParseSamples(ScrapeOf(collector));
  for (int fd : fds) close(fd);
  EXPECT_EQ(SumOf(samples, "process_open_fds"), before + 7);

  struct rlimit limit;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  EXPECT_EQ(SumOf(samples, "process_max_fds"),
            static_cast<double>(limit.rlim_cur));
  EXPECT_GT(SumOf(samples, "process_resident_memory_bytes"), 0);
  EXPECT_GE(SumOf(samples, "process_virtual_memory_bytes"),
            SumOf(samples, "process_resident_memory_bytes"));
  EXPECT_GE(SumOf(samples, "process_cpu_seconds_total"), 0);
  // Started before now, and after the epoch's first day.
  const double start = SumOf(samples, "process_start_time_seconds");
  EXPECT_GT(start, 86400);
  EXPECT_LE(start, absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()) + 1);
}

}  // namespace
}  // namespace server_process_collector_test
}  // namespace backfill
