#include "bench/perf_read_probe.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.pb.h"
#include "bench/perf_table.h"

namespace backfill::bench {

ReadProbe::ReadProbe(BackfillClient* client, std::string job_id)
    : client_(client), job_id_(std::move(job_id)) {
  thread_ = std::thread([this] { Loop(); });
}

ReadProbe::~ReadProbe() { Stop(); }

double ReadProbe::WorstP99() const {
  const Latencies& l = latencies_;
  return std::max(
      {Quantile(l.get, 0.99), Quantile(l.list, 0.99), Quantile(l.watch, 0.99)});
}

std::string ReadProbe::Figures() const {
  auto figures = [](const char* name, const std::vector<double>& v) {
    return absl::StrFormat("%s p50 %.1f ms, p99 %.1f ms (%d calls)", name,
                           Quantile(v, 0.5) * 1e3, Quantile(v, 0.99) * 1e3,
                           static_cast<int>(v.size()));
  };
  const Latencies& l = latencies_;
  std::string text =
      absl::StrCat(figures("GetBackfill", l.get), "; ",
                   figures("ListBackfills (50)", l.list), "; ",
                   figures("WatchBackfill's first update", l.watch));
  if (l.errors > 0) {
    absl::StrAppend(&text, "; ", l.errors,
                    " errors, the first: ", l.first_error);
  }
  return text;
}

void ReadProbe::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void ReadProbe::Loop() {
  auto note = [this](const absl::Status& s) {
    if (s.ok()) return;
    if (latencies_.errors++ == 0) latencies_.first_error = s.ToString();
  };
  auto since = [](absl::Time start) {
    return absl::ToDoubleSeconds(absl::Now() - start);
  };
  while (!stop_.load()) {
    absl::Time start = absl::Now();
    absl::StatusOr<v1::Backfill> got =
        client_->Get(job_id_, v1::BACKFILL_VIEW_BASIC);
    latencies_.get.push_back(since(start));
    note(got.status());

    v1::ListBackfillsRequest request;
    request.set_page_size(50);
    request.set_view(v1::BACKFILL_VIEW_BASIC);
    start = absl::Now();
    absl::StatusOr<v1::ListBackfillsResponse> listed = client_->List(request);
    latencies_.list.push_back(since(start));
    note(listed.status());

    // The first update, then the stream is closed.
    start = absl::Now();
    double first = -1;
    absl::Status watched = client_->Watch(
        job_id_,
        [&](const v1::Backfill&) {
          first = since(start);
          return false;
        },
        v1::BACKFILL_VIEW_BASIC);
    note(watched);
    if (first >= 0) latencies_.watch.push_back(first);
    absl::SleepFor(absl::Milliseconds(10));
  }
}

}  // namespace backfill::bench
