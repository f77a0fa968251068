#include "server/governance_convert.h"

#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/base/error_details.h"
#include "core/governance/page_token.h"
#include "server/proto_convert.h"
#include "server/vocabulary_convert.h"
#include "server/wire_text.h"

namespace backfill {
namespace {

// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, the range of
// google.protobuf.Timestamp.
constexpr int64_t kMinTimestampSeconds = -62135596800;
constexpr int64_t kMaxTimestampSeconds = 253402300799;

// Sets the field `mutable_field()` returns only for a finite time.
template <typename Mutable>
void SetTime(absl::Time t, Mutable mutable_field) {
  google::protobuf::Timestamp ts;
  if (TimeToProto(t, &ts)) *mutable_field() = ts;
}

v1::BackfillState StateNamed(const std::string& name) {
  absl::StatusOr<JobState> state = ParseJobState(name);
  return state.ok() ? StateToProto(*state)
                    : v1::BACKFILL_STATE_UNSPECIFIED;  // "" on creation
}

}  // namespace

v1::ExplainPartitionResponse PartitionHistoryToProto(
    const PartitionHistory& history) {
  v1::ExplainPartitionResponse out;
  out.set_dataset(history.dataset);
  out.set_partition(history.partition);
  for (const PartitionVersion& v : history.versions) {
    const LineageRecord& r = v.record;
    v1::PartitionVersion* pv = out.add_versions();
    SetTime(r.published_at, [pv] { return pv->mutable_publish_time(); });
    pv->set_backfill_id(r.job_id);
    pv->set_state(StateToProto(v.job_state));
    pv->set_kind(VersionKindToProto(r.action));
    pv->set_reason(r.reason);
    pv->set_ticket(r.ticket);
    pv->set_requested_by(r.requested_by);
    if (r.approval) *pv->mutable_approval() = ApprovalToProto(*r.approval);
    pv->set_transform_version(r.transform_version);
    for (const InputFingerprint& in : r.inputs) {
      v1::InputVersion* iv = pv->add_inputs();
      iv->set_dataset(in.dataset);
      iv->set_partition(in.partition);
      iv->set_fingerprint(in.fingerprint);
      iv->set_rows(in.rows);
    }
    pv->set_rows(r.row_count);
    pv->set_output_fingerprint(r.output_fingerprint);
    if (v.diff) *pv->mutable_diff() = PartitionDiffToProto(*v.diff);
    for (const std::string& key : v.keys) pv->add_keys(key);
    for (const CheckResult& c : v.checks) {
      *pv->add_checks() = CheckResultToProto(c);
    }
  }
  if (history.stale) {
    out.set_stale(true);
    out.set_stale_reason(history.stale->reason);
    for (const StaleInput& in : history.stale->inputs) {
      v1::StaleInput* si = out.add_stale_inputs();
      si->set_dataset(in.dataset);
      si->set_partition(in.partition);
      si->set_read_fingerprint(in.read_fingerprint);
      si->set_current_fingerprint(in.now_fingerprint);
      si->set_backfill_id(in.job_id);
      si->set_kind(VersionKindToProto(in.action));
      SetTime(in.at, [si] { return si->mutable_time(); });
      si->set_excluded_downstream(in.excluded_downstream);
    }
  }
  MakeStringsUtf8(&out);
  return out;
}

v1::AuditEvent AuditEventToProto(const AuditEvent& event) {
  v1::AuditEvent out;
  out.set_seq(event.seq);
  out.set_backfill_id(event.job_id);
  out.set_from_state(StateNamed(event.from_state));
  out.set_to_state(StateNamed(event.to_state));
  out.set_message(event.message);
  out.set_subject(event.subject);
  SetTime(event.at, [&out] { return out.mutable_time(); });
  MakeStringsUtf8(&out);
  return out;
}

absl::StatusOr<AuditQuery> AuditQueryFromProto(
    const v1::ListAuditEventsRequest& request) {
  AuditQuery query;
  if (!request.backfill_id().empty()) {
    if (absl::Status valid =
            ValidateJobId(request.backfill_id(), "backfill_id");
        !valid.ok()) {
      return valid;
    }
    query.job_id = request.backfill_id();
  }
  if (request.has_since()) {
    const google::protobuf::Timestamp& since = request.since();
    if (since.seconds() < kMinTimestampSeconds ||
        since.seconds() > kMaxTimestampSeconds || since.nanos() < 0 ||
        since.nanos() > 999999999) {
      return InvalidFieldError(
          "since", "TIMESTAMP_INVALID",
          absl::StrCat(
              "`since` {seconds: ", since.seconds(), ", nanos: ", since.nanos(),
              "} is not a valid timestamp: seconds must lie in ",
              kMinTimestampSeconds, "..", kMaxTimestampSeconds,
              " (0001-01-01..9999-12-31 UTC) and nanos in 0..999999999"));
    }
    query.since = absl::FromUnixSeconds(since.seconds()) +
                  absl::Nanoseconds(since.nanos());
  }
  absl::StatusOr<int> page_size = PageSizeFromProto(
      request.page_size(), kDefaultAuditPageSize, kMaxAuditPageSize);
  if (!page_size.ok()) return page_size.status();
  query.limit = *page_size;
  // The token holds the seq of the previous page's last event.
  if (!request.page_token().empty()) {
    absl::StatusOr<int64_t> after = DecodePageToken(
        PageList::kAudit, request.page_token(), AuditFilterHash(request),
        "backfill_id and since", /*min_position=*/1);
    if (!after.ok()) return after.status();
    query.after_seq = *after;
  }
  return query;
}

uint64_t AuditFilterHash(const v1::ListAuditEventsRequest& request) {
  return FilterHash(
      PageList::kAudit,
      {request.backfill_id(), request.has_since()
                                  ? absl::StrCat(request.since().seconds(), ".",
                                                 request.since().nanos())
                                  : std::string()});
}

v1::ListAuditEventsResponse AuditPageToProto(const AuditPage& page,
                                             uint64_t filter_hash,
                                             size_t max_bytes) {
  v1::ListAuditEventsResponse out;
  size_t bytes = 0;
  for (size_t i = 0; i < page.events.size(); ++i) {
    v1::AuditEvent event = AuditEventToProto(page.events[i]);
    const size_t size = event.ByteSizeLong();
    if (i > 0 && bytes + size > max_bytes) {
      // The next page starts with this event.
      out.set_next_page_token(EncodePageToken(PageList::kAudit, filter_hash,
                                              page.events[i - 1].seq));
      return out;
    }
    bytes += size;
    *out.add_events() = std::move(event);
  }
  if (page.next_after_seq > 0) {
    out.set_next_page_token(
        EncodePageToken(PageList::kAudit, filter_hash, page.next_after_seq));
  }
  return out;
}

}  // namespace backfill
