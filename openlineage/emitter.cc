#include "openlineage/emitter.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/model/job_state_machine.h"

namespace backfill::openlineage {
namespace {

// How long one backoff sleep may run before the drain deadline is looked
// at again.
constexpr absl::Duration kSleepSlice = absl::Milliseconds(200);

constexpr char kLineagePath[] = "/api/v1/lineage";

// At most one log line about dropped changes per this much time.
constexpr absl::Duration kDropLogInterval = absl::Minutes(1);

bool Retryable(int status) {
  return status >= 500 || status == 408 || status == 429;
}

}  // namespace

absl::StatusOr<std::string> LineageEndpoint(const std::string& url) {
  auto bad = [&url](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--openlineage-url \"", absl::CEscape(url), "\" ", why,
                     " (expected http://HOST[:PORT][/PATH] or https://...; "
                     "events are POSTed to URL/api/v1/lineage, or to URL "
                     "itself when it ends in /api/v1/lineage)"));
  };
  std::string_view rest = url;
  const std::string lower = absl::AsciiStrToLower(url);
  if (absl::StartsWith(lower, "http://")) {
    rest.remove_prefix(7);
  } else if (absl::StartsWith(lower, "https://")) {
    rest.remove_prefix(8);
  } else {
    return bad("is not an http:// or https:// URL");
  }
  for (char c : url) {
    if (static_cast<unsigned char>(c) <= 0x20 ||
        static_cast<unsigned char>(c) >= 0x7f) {
      return bad("contains a space, a control or a non-ASCII character");
    }
  }
  if (url.find_first_of("?#") != std::string::npos) {
    return bad("has a query or a fragment");
  }
  const std::string_view authority = rest.substr(0, rest.find('/'));
  if (authority.find('@') != std::string_view::npos) {
    return bad(
        "carries credentials; pass none on the command line (they would "
        "show in process listings and logs)");
  }
  if (authority.empty() || authority[0] == ':') return bad("has no host");
  std::string base = url;
  while (absl::EndsWith(base, "/")) base.pop_back();
  // The full endpoint, as OpenLineage clients are often configured: as is.
  if (absl::EndsWith(absl::AsciiStrToLower(base), kLineagePath)) return base;
  return absl::StrCat(base, kLineagePath);
}

std::string WarehouseNamespace(const std::string& host,
                               const std::string& absolute_path) {
  return absl::StrCat("sqlite://",
                      host.empty() ? "localhost" : absl::AsciiStrToLower(host),
                      absolute_path);
}

std::string PostgresNamePrefix(const std::string& database,
                               const std::string& schema) {
  return absl::StrCat(database, ".", schema, ".");
}

absl::Status ValidateNamespace(const std::string& name_space) {
  bool ok = !name_space.empty() && name_space.size() <= 256;
  for (char c : name_space) {
    if (static_cast<unsigned char>(c) <= 0x20 ||
        static_cast<unsigned char>(c) >= 0x7f) {
      ok = false;
    }
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--openlineage-namespace \"", absl::CEscape(name_space),
      "\" must be 1 to 256 printable ASCII characters without spaces "
      "(e.g. backfilld or prod-backfilld)"));
}

OpenLineageEmitter::OpenLineageEmitter(EmitterOptions options,
                                       const LiveCatalog* catalog,
                                       StateStore* store, HttpClient* http,
                                       const Clock* clock,
                                       DeliveryListener* listener)
    : options_(std::move(options)),
      catalog_(catalog),
      store_(store),
      http_(http),
      clock_(clock),
      listener_(listener) {}

OpenLineageEmitter::OpenLineageEmitter(EmitterOptions options,
                                       const Catalog* catalog,
                                       StateStore* store, HttpClient* http,
                                       const Clock* clock,
                                       DeliveryListener* listener)
    : options_(std::move(options)),
      owned_catalog_(LiveCatalog::Borrowing(catalog)),
      catalog_(owned_catalog_.get()),
      store_(store),
      http_(http),
      clock_(clock),
      listener_(listener) {}

OpenLineageEmitter::~OpenLineageEmitter() { Shutdown(); }

absl::Status OpenLineageEmitter::Start() {
  absl::StatusOr<std::string> endpoint = LineageEndpoint(options_.url);
  if (!endpoint.ok()) return endpoint.status();
  if (absl::Status s = ValidateNamespace(options_.job_namespace); !s.ok()) {
    return s;
  }
  if (options_.queue_capacity == 0 ||
      options_.initial_backoff <= absl::ZeroDuration() ||
      options_.max_backoff < options_.initial_backoff) {
    return absl::InvalidArgumentError(
        "OpenLineage queue capacity must be at least 1, and backoffs "
        "positive with max_backoff >= initial_backoff");
  }
  absl::StatusOr<StoreInfo> info = store_->Info();
  if (!info.ok()) {
    return absl::Status(info.status().code(),
                        absl::StrCat("cannot read the state store's id for "
                                     "OpenLineage run ids: ",
                                     info.status().message()));
  }
  absl::MutexLock lock(&mu_);
  if (started_ || stopping_) {
    return absl::FailedPreconditionError(
        "the OpenLineage emitter was already started or stopped");
  }
  endpoint_ = *std::move(endpoint);
  config_.job_namespace = options_.job_namespace;
  config_.dataset_namespace = options_.dataset_namespace;
  config_.dataset_name_prefix = options_.dataset_name_prefix;
  config_.store_id = info->store_id;
  config_.version = options_.version;
  started_at_ = clock_->Now();
  started_ = true;
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void OpenLineageEmitter::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    drain_deadline_ = clock_->Now() + options_.drain_timeout;
  }
  if (thread_.joinable()) thread_.join();
  // Whatever is left (never started, or the drain ran out) is dropped.
  {
    absl::MutexLock lock(&mu_);
    const int64_t left = static_cast<int64_t>(queue_.size());
    queue_.clear();
    if (left > 0) {
      counts_.changes_dropped += left;
      unreported_drops_ += left;
      last_drop_why_ = "the daemon stopped before they were sent";
    }
  }
  // The delivery thread is gone: report what it did not, and log it.
  ReportDrops(/*flush=*/true);
}

void OpenLineageEmitter::OnJobTransition(const std::string& job_id,
                                         JobState from, JobState to,
                                         const std::string& message) {
  if (!MaySendEvents(from, to)) return;
  const absl::Time at = clock_->Now();
  bool dropped = false;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      dropped = true;
    } else {
      Change change{job_id, from, to, message, at};
      if (queue_.size() >= options_.queue_capacity) {
        dropped = true;
        // Progress before outcomes: the oldest change that ends no run,
        // else the new one if it ends none, else the oldest.
        auto progress =
            std::find_if(queue_.begin(), queue_.end(),
                         [](const Change& c) { return !IsTerminal(c.to); });
        if (progress != queue_.end()) {
          queue_.erase(progress);
        } else if (IsTerminal(to)) {
          queue_.pop_front();
        }
        if (queue_.size() < options_.queue_capacity) {
          queue_.push_back(std::move(change));
        }
      } else {
        queue_.push_back(std::move(change));
      }
    }
    if (dropped) {
      // Counted here; reported (and logged) by the delivery thread.
      ++counts_.changes_dropped;
      ++unreported_drops_;
      last_drop_why_ = stopping_ ? "the daemon is stopping"
                                 : "the OpenLineage queue is full";
    }
  }
}

OpenLineageEmitter::Counts OpenLineageEmitter::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

size_t OpenLineageEmitter::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

bool OpenLineageEmitter::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool OpenLineageEmitter::PastDrainDeadline() const {
  absl::MutexLock lock(&mu_);
  return stopping_ && clock_->Now() >= drain_deadline_;
}

void OpenLineageEmitter::Run() {
  while (true) {
    Change change;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](OpenLineageEmitter* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return !self->queue_.empty() || self->stopping_ ||
                   self->unreported_drops_ > 0;
          },
          this));
      if (queue_.empty() && unreported_drops_ > 0 && !stopping_) {
        change.job_id.clear();  // only drops to report
      } else {
        if (queue_.empty()) return;  // stopping, nothing left
        if (stopping_ && clock_->Now() >= drain_deadline_) return;
        change = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    ReportDrops(/*flush=*/false);
    if (!change.job_id.empty()) Deliver(change);
  }
}

void OpenLineageEmitter::DropChange(const std::string& why) {
  {
    absl::MutexLock lock(&mu_);
    ++counts_.changes_dropped;
    ++unreported_drops_;
    last_drop_why_ = why;
  }
  ReportDrops(/*flush=*/false);
}

void OpenLineageEmitter::ReportDrops(bool flush) {
  int64_t n = 0;
  std::string why;
  {
    absl::MutexLock lock(&mu_);
    n = unreported_drops_;
    unreported_drops_ = 0;
    if (n > 0) last_reported_why_ = last_drop_why_;
    why = last_reported_why_;
  }
  drops_since_log_ += n;
  if (drops_since_log_ == 0) return;
  std::string summary;
  const absl::Time now = clock_->Now();
  if (flush || now - last_drop_log_ >= kDropLogInterval) {
    summary = absl::StrCat(
        "dropped ", drops_since_log_,
        drops_since_log_ == 1 ? " job state change" : " job state changes",
        " unsent; the last: ", why);
    drops_since_log_ = 0;
    last_drop_log_ = now;
  }
  if (listener_ != nullptr && (n > 0 || !summary.empty())) {
    listener_->OnChangesDropped(n, summary);
  }
}

std::vector<AuditEvent> OpenLineageEmitter::EventsBefore(
    const Change& change, const std::vector<AuditEvent>& history) {
  const std::string from = JobStateName(change.from);
  const std::string to = JobStateName(change.to);
  auto is_change = [&](const AuditEvent& e) {
    return e.from_state == from && e.to_state == to;
  };
  // Changes are heard in order, so this one is the first match after the
  // last one matched; for a job not heard of since Start(), the first
  // match after the events recorded before Start() (the earlier changes
  // were heard, if at all, by an earlier process).
  int64_t after = -1;
  const auto cursor = cursors_.find(change.job_id);
  const bool heard_before = cursor != cursors_.end();
  if (heard_before) {
    after = cursor->second;
  } else {
    for (const AuditEvent& e : history) {
      if (e.at < started_at_) after = e.seq;
    }
  }
  size_t index = history.size();
  for (size_t i = 0; i < history.size(); ++i) {
    if (history[i].seq > after && is_change(history[i])) {
      index = i;
      break;
    }
  }
  // Not found: for a job heard of before, a repeated notification (the
  // whole history precedes it); otherwise the latest such move.
  if (index == history.size() && !heard_before) {
    for (size_t i = history.size(); i-- > 0;) {
      if (is_change(history[i])) {
        index = i;
        break;
      }
    }
  }
  if (IsFinal(change.to)) {
    cursors_.erase(change.job_id);  // no change of the job follows
  } else if (index < history.size()) {
    cursors_[change.job_id] = history[index].seq;
  }
  return std::vector<AuditEvent>(history.begin(), history.begin() + index);
}

void OpenLineageEmitter::Deliver(const Change& change) {
  if (!MaySendEvents(change.from, change.to)) return;
  absl::StatusOr<Job> job = absl::UnknownError("not read");
  absl::StatusOr<std::vector<PartitionTask>> tasks = job.status();
  absl::StatusOr<std::vector<AuditEvent>> history = job.status();
  // A job that is gone is dropped; any other read error (a busy or
  // failing store) is retried with the events' backoff until the drain
  // time runs out.
  absl::Duration backoff = options_.initial_backoff;
  while (true) {
    job = store_->GetJob(change.job_id);
    tasks = job.ok() ? store_->ListTasks(change.job_id)
                     : absl::StatusOr<std::vector<PartitionTask>>(job.status());
    history = tasks.ok()
                  ? store_->ListAuditEvents(change.job_id)
                  : absl::StatusOr<std::vector<AuditEvent>>(tasks.status());
    if (history.ok()) break;
    const std::string why = absl::StrCat("cannot read job ", change.job_id,
                                         ": ", history.status().message());
    if (absl::IsNotFound(history.status()) || !Backoff(backoff)) {
      DropChange(why);
      return;
    }
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  const std::optional<Outcome> outcome = OutcomeOf(
      change.from, change.to, HistoryOf(EventsBefore(change, *history)));
  if (!outcome) return;
  const std::shared_ptr<const Catalog> catalog = catalog_->Get();
  absl::StatusOr<std::vector<std::string>> events =
      outcome->rollback
          ? BuildRollbackEvents(config_, *catalog, *job, change.message,
                                change.at)
          : BuildRunEvents(config_, *catalog, *job, *tasks, change.to,
                           change.message, *outcome, change.at);
  if (!events.ok()) {
    DropChange(std::string(events.status().message()));
    return;
  }
  for (const std::string& json : *events) Send(json);
}

void OpenLineageEmitter::Send(const std::string& json) {
  HttpRequest request;
  request.method = "POST";
  request.url = endpoint_;
  request.headers = {{"Content-Type", "application/json"}};
  request.body = json;
  request.connect_timeout = options_.connect_timeout;
  request.timeout = options_.request_timeout;
  request.max_response_bytes = 64 * 1024;
  absl::Duration backoff = options_.initial_backoff;
  while (true) {
    std::string why;
    bool final_answer = false;
    if (PastDrainDeadline()) {
      why = "the drain time at shutdown ran out";
      final_answer = true;
    } else {
      absl::StatusOr<HttpResponse> response = http_->Send(request);
      if (response.ok() && response->status >= 200 && response->status < 300) {
        {
          absl::MutexLock lock(&mu_);
          ++counts_.sent;
        }
        if (listener_ != nullptr) listener_->OnEventSent();
        return;
      }
      why = response.ok()
                ? absl::StrCat(endpoint_, " answered HTTP ", response->status)
                : std::string(response.status().message());
      final_answer = response.ok() && !Retryable(response->status);
      {
        absl::MutexLock lock(&mu_);
        ++counts_.failed_attempts;
      }
      if (listener_ != nullptr) listener_->OnAttemptFailed(why);
    }
    // Retried until accepted: only a refusal or the end of the drain time
    // gives an event up.
    if (final_answer || !Backoff(backoff)) {
      {
        absl::MutexLock lock(&mu_);
        ++counts_.events_dropped;
      }
      if (listener_ != nullptr) {
        listener_->OnEventDropped(
            absl::StrCat("gave up an OpenLineage event: ", why));
      }
      return;
    }
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

bool OpenLineageEmitter::Backoff(absl::Duration d) {
  while (d > absl::ZeroDuration()) {
    absl::Duration slice = std::min(d, kSleepSlice);
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) {
        const absl::Duration left = drain_deadline_ - clock_->Now();
        if (left <= absl::ZeroDuration()) return false;
        slice = std::min(slice, left);  // wake up at the deadline
      }
    }
    clock_->SleepFor(slice);
    d -= slice;
    ReportDrops(/*flush=*/false);
  }
  return !PastDrainDeadline();
}

}  // namespace backfill::openlineage
