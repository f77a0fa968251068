#include "tests/testing/memory_lease_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace backfill::testing {
namespace {

// As PgLeaseStore checks them, with its messages.
absl::Status CheckMemoryLeaseName(const char* what, const std::string& value,
                                  bool may_be_empty = false) {
  if (value.empty() && !may_be_empty) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease store: ", what, " must not be empty"));
  }
  if (value.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease store: ", what, " must hold no NUL character"));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> MemoryLeaseTtl(absl::Duration ttl) {
  if (ttl == absl::InfiniteDuration() || ttl < absl::Microseconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease store: a lease's ttl must be positive and finite "
                     "(at least 1us), not ",
                     absl::FormatDuration(ttl)));
  }
  return absl::Microseconds(absl::ToInt64Microseconds(ttl));
}

absl::Time ToMicros(absl::Time t) {
  return absl::FromUnixMicros(absl::ToUnixMicros(t));
}

}  // namespace

MemoryLeaseStore::MemoryLeaseStore(const Clock* clock) : clock_(clock) {}

absl::Time MemoryLeaseStore::Now() const { return ToMicros(clock_->Now()); }

absl::Status MemoryLeaseStore::Heartbeat(const NodeRecord& node) {
  RETURN_IF_ERROR(CheckMemoryLeaseName("a node's name", node.name));
  if (node.started_at == absl::InfinitePast() ||
      node.started_at == absl::InfiniteFuture()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lease store: node ", node.name, " has no start time (started_at)"));
  }
  absl::MutexLock lock(&mu_);
  const absl::Time now = Now();
  NodeRecord& record = nodes_[node.name];
  const absl::Time last = record.last_heartbeat;
  record = node;
  record.started_at = ToMicros(node.started_at);
  record.last_heartbeat = std::max(last, now);
  return absl::OkStatus();
}

absl::Status MemoryLeaseStore::Leave(const std::string& node) {
  RETURN_IF_ERROR(CheckMemoryLeaseName("a node's name", node));
  absl::MutexLock lock(&mu_);
  for (auto& [job_id, lease] : leases_) {
    if (lease.node == node) {
      lease.node.clear();
      lease.step.clear();
    }
  }
  nodes_.erase(node);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<NodeRecord>> MemoryLeaseStore::ListNodes() {
  absl::MutexLock lock(&mu_);
  std::vector<NodeRecord> out;
  out.reserve(nodes_.size());
  for (const auto& [name, node] : nodes_) out.push_back(node);
  return out;
}

absl::StatusOr<ClaimResult> MemoryLeaseStore::Claim(const std::string& job_id,
                                                    const std::string& node,
                                                    const std::string& step,
                                                    absl::Duration ttl) {
  RETURN_IF_ERROR(CheckMemoryLeaseName("a job id", job_id));
  RETURN_IF_ERROR(CheckMemoryLeaseName("a node's name", node));
  RETURN_IF_ERROR(CheckMemoryLeaseName("a step", step, /*may_be_empty=*/true));
  ASSIGN_OR_RETURN(absl::Duration lasts, MemoryLeaseTtl(ttl));
  absl::MutexLock lock(&mu_);
  const absl::Time now = Now();
  ClaimResult result;
  auto it = leases_.find(job_id);
  if (it == leases_.end()) {
    JobLease lease;
    lease.job_id = job_id;
    lease.node = node;
    lease.token = 1;
    lease.step = step;
    lease.claimed_at = now;
    lease.expires_at = now + lasts;
    leases_[job_id] = lease;
    result.claimed = true;
    result.lease = lease;
    result.lease.live = true;
    return result;
  }
  JobLease& lease = it->second;
  const bool live = lease.expires_at > now;
  if (!lease.node.empty() && lease.node != node && live) {
    result.lease = lease;
    result.lease.live = true;
    return result;
  }
  if (!lease.node.empty() && lease.node != node) result.taken_from = lease.node;
  if (lease.node != node || !live) {
    ++lease.token;
    lease.claimed_at = now;
  }
  lease.node = node;
  lease.step = step;
  lease.expires_at = now + lasts;
  result.claimed = true;
  result.lease = lease;
  result.lease.live = true;
  return result;
}

absl::StatusOr<std::vector<std::string>> MemoryLeaseStore::Renew(
    const std::string& node, const std::vector<JobLease>& held,
    absl::Duration ttl) {
  RETURN_IF_ERROR(CheckMemoryLeaseName("a node's name", node));
  for (const JobLease& lease : held) {
    RETURN_IF_ERROR(CheckMemoryLeaseName("a job id", lease.job_id));
  }
  ASSIGN_OR_RETURN(absl::Duration lasts, MemoryLeaseTtl(ttl));
  absl::MutexLock lock(&mu_);
  const absl::Time now = Now();
  std::vector<std::string> lost;
  for (const JobLease& h : held) {
    auto it = leases_.find(h.job_id);
    if (it == leases_.end() || it->second.node != node ||
        it->second.token != h.token) {
      lost.push_back(h.job_id);
      continue;
    }
    it->second.expires_at = now + lasts;
  }
  auto record = nodes_.find(node);
  if (record != nodes_.end()) {
    record->second.last_heartbeat =
        std::max(record->second.last_heartbeat, now);
  }
  return lost;
}

absl::Status MemoryLeaseStore::Release(const JobLease& lease) {
  RETURN_IF_ERROR(CheckMemoryLeaseName("a job id", lease.job_id));
  RETURN_IF_ERROR(CheckMemoryLeaseName("a node's name", lease.node));
  absl::MutexLock lock(&mu_);
  auto it = leases_.find(lease.job_id);
  if (it != leases_.end() && it->second.node == lease.node &&
      it->second.token == lease.token) {
    it->second.node.clear();
    it->second.step.clear();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<JobLease>> MemoryLeaseStore::ListLeases() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = Now();
  std::vector<JobLease> out;
  for (const auto& [job_id, lease] : leases_) {
    if (lease.node.empty()) continue;
    out.push_back(lease);
    out.back().live = lease.expires_at > now;
  }
  return out;
}

absl::StatusOr<int64_t> MemoryLeaseStore::SendRequest(
    const NodeRequest& request) {
  if (request.node.empty() || request.job_id.empty() || request.kind.empty()) {
    return absl::InvalidArgumentError(
        "lease store: a request names its node, job and kind");
  }
  absl::MutexLock lock(&mu_);
  const int64_t id = next_request_++;
  Request& r = requests_[id];
  r.request = request;
  r.request.id = id;
  return id;
}

absl::StatusOr<std::vector<NodeRequest>> MemoryLeaseStore::TakeRequests(
    const std::string& node) {
  if (node.empty()) {
    return absl::InvalidArgumentError(
        "lease store: a node's name must not be empty");
  }
  absl::MutexLock lock(&mu_);
  std::vector<NodeRequest> out;
  for (auto& [id, r] : requests_) {
    if (r.request.node != node || r.taken) continue;
    r.taken = true;
    out.push_back(r.request);
  }
  return out;
}

absl::Status MemoryLeaseStore::AnswerRequest(int64_t id,
                                             const NodeAnswer& answer) {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(id);
  if (it != requests_.end() && !it->second.answer.has_value()) {
    it->second.answer = answer;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<NodeAnswer>> MemoryLeaseStore::ReadAnswer(
    int64_t id, bool withdraw) {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no request ", id, " is waiting for an answer"));
  }
  if (it->second.answer.has_value()) {
    std::optional<NodeAnswer> answer = it->second.answer;
    requests_.erase(it);
    return answer;
  }
  if (withdraw && !it->second.taken) {
    requests_.erase(it);
    return absl::NotFoundError(
        absl::StrCat("request ", id, " was withdrawn before anyone took it"));
  }
  return std::optional<NodeAnswer>();
}

}  // namespace backfill::testing
