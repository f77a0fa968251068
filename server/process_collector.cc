#include "server/process_collector.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace backfill {
namespace {

std::string ReadFile(const char* path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

prometheus::MetricFamily Family(const char* name, const char* help,
                                prometheus::MetricType type, double value) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
  return family;
}

}  // namespace

absl::StatusOr<ProcStat> ParseProcStat(absl::string_view text) {
  // "pid (comm) state ppid ...": fields after the last ')' start at the
  // 3rd (state); utime is the 14th, stime the 15th, starttime the 22nd.
  const size_t close = text.rfind(')');
  if (close == absl::string_view::npos) {
    return absl::InvalidArgumentError("/proc stat: no command name");
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(text.substr(close + 1), ' ', absl::SkipWhitespace());
  if (fields.size() < 20) {
    return absl::InvalidArgumentError("/proc stat: too few fields");
  }
  ProcStat stat;
  if (!absl::SimpleAtoi(fields[11], &stat.utime_ticks) ||
      !absl::SimpleAtoi(fields[12], &stat.stime_ticks) ||
      !absl::SimpleAtoi(fields[19], &stat.start_ticks)) {
    return absl::InvalidArgumentError("/proc stat: a field is not a number");
  }
  return stat;
}

absl::StatusOr<std::pair<uint64_t, uint64_t>> ParseProcStatm(
    absl::string_view text) {
  std::vector<absl::string_view> fields =
      absl::StrSplit(text, ' ', absl::SkipWhitespace());
  std::pair<uint64_t, uint64_t> pages;
  if (fields.size() < 2 ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[0]), &pages.first) ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[1]), &pages.second)) {
    return absl::InvalidArgumentError("/proc statm: not two page counts");
  }
  return pages;
}

absl::StatusOr<uint64_t> ParseBootTime(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) {
      uint64_t btime = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &btime)) {
        return btime;
      }
    }
  }
  return absl::InvalidArgumentError("/proc/stat: no btime line");
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  const long ticks = sysconf(_SC_CLK_TCK);
  const long page = sysconf(_SC_PAGESIZE);
  absl::StatusOr<ProcStat> stat = ParseProcStat(ReadFile("/proc/self/stat"));
  if (stat.ok() && ticks > 0) {
    out.push_back(Family(
        "process_cpu_seconds_total",
        "Total user and system CPU time spent in seconds.", MetricType::Counter,
        static_cast<double>(stat->utime_ticks + stat->stime_ticks) /
            static_cast<double>(ticks)));
    if (absl::StatusOr<uint64_t> boot = ParseBootTime(ReadFile("/proc/stat"));
        boot.ok()) {
      out.push_back(Family(
          "process_start_time_seconds",
          "Start time of the process since unix epoch in seconds.",
          MetricType::Gauge,
          static_cast<double>(*boot) + static_cast<double>(stat->start_ticks) /
                                           static_cast<double>(ticks)));
    }
  }
  absl::StatusOr<std::pair<uint64_t, uint64_t>> statm =
      ParseProcStatm(ReadFile("/proc/self/statm"));
  if (statm.ok() && page > 0) {
    out.push_back(
        Family("process_resident_memory_bytes",
               "Resident memory size in bytes.", MetricType::Gauge,
               static_cast<double>(statm->second) * static_cast<double>(page)));
    out.push_back(
        Family("process_virtual_memory_bytes", "Virtual memory size in bytes.",
               MetricType::Gauge,
               static_cast<double>(statm->first) * static_cast<double>(page)));
  }
  std::error_code ec;
  std::filesystem::directory_iterator fds("/proc/self/fd", ec);
  if (!ec) {
    int64_t open = 0;
    for (const auto& entry : fds) {
      (void)entry;
      ++open;
    }
    // The iterator's own descriptor is one of them.
    out.push_back(Family("process_open_fds", "Number of open file descriptors.",
                         MetricType::Gauge,
                         static_cast<double>(open > 0 ? open - 1 : 0)));
  }
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur != RLIM_INFINITY) {
    out.push_back(
        Family("process_max_fds", "Maximum number of open file descriptors.",
               MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
  return out;
}

}  // namespace backfill
