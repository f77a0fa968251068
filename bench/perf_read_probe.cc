#include "bench/perf_read_probe.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backfill/v1/backfill.pb.h"

namespace backfill::bench {

ReadProbe::ReadProbe(BackfillClient* client, std::string job_id)
    : client_(client), job_id_(std::move(job_id)) {
  thread_ = std::thread([this] { Loop(); });
}

ReadProbe::~ReadProbe() { Stop(); }

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
